"""Cluster objects -> Scenario: the "Reading" half of the contract (docs/kubernetes.md).

`build_scenario` takes what one observation read (nodes, pods, queues, namespace
labels, reservations) and returns the scenario the planner sees, with warnings a
person should read. It does no I/O. What it decides where the contract is silent:

- GPUs held by pods gpu-policy may not touch (no queue: *unmanaged*; being deleted:
  *terminating*) become non-preemptible jobs of two snapshot-only queues. Unmanaged
  GPUs are a lasting drain: that queue deserves exactly what it holds, so the teams
  share the rest. Terminating GPUs come back soon: that queue deserves nothing and
  weighs nothing, so fair shares stay as they are and nobody is evicted twice.
- A node that takes no new work (cordoned, not Ready) keeps its running jobs; all its
  GPUs are marked unhealthy (no new work), and its labels say why. A tainted node keeps
  its taints: it takes the jobs that tolerate them. Of its labels, the snapshot keeps
  those some job's node selector or affinity looks at, and those of the topology levels
  (but kubernetes.io/hostname: a level of it is the node itself).
- CPU and memory left for GPU jobs are the node's allocatable minus what its
  non-GPU pods request.
- Which pods are one job, and which jobs are gangs: gpu_policy.kubernetes.read.workloads. A
  gang with at least its minimum size bound and more pods waiting is planned as the bound
  part; a broken gang (fewer hold GPUs than its minimum, and the others will not be bound
  without gpu-policy) is evicted whole (`broken`), its GPUs held as terminating meanwhile;
  a gang that has fewer pods than its minimum, none bound, is not planned yet (`incomplete`
  says why): a gated gang cannot start until all its pods exist.
- A pod released by gpu-policy but not bound yet (no gate, a hostname selector) holds
  that node's GPUs, as a bound pod does: nothing is promised twice. A gang's placement is
  reserved before its first pod is released, so a gang released part way is its
  reservation (all its GPUs held) until its last pod is released, never a broken gang.
- A composable node is kept even with no GPUs: composition may give it some.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from gpu_policy.kubernetes.read.composable import ComposedNodes
from gpu_policy.kubernetes.read.constraints import selected_labels
from gpu_policy.kubernetes.read.devices import physical_requests
from gpu_policy.kubernetes.names import (GPU_INDEX_ANNOTATION, HOSTNAME_LABEL, NO_NEW_WORK_LABEL, QUEUE_LABEL,
                                         TERMINATING_QUEUE, UNMANAGED_QUEUE)
from gpu_policy.kubernetes.read.memo import LookMemo
from gpu_policy.kubernetes.read.nodes import NodeView
from gpu_policy.kubernetes.read.pods import PodRef, PodView
from gpu_policy.kubernetes.read.progress import Moments, ages, progress
from gpu_policy.kubernetes.read.reservations import Reservation
from gpu_policy.kubernetes.read.topology import words
from gpu_policy.kubernetes.read.workloads import gang_trouble, with_pod_groups
from gpu_policy.model import Job, Namespace, Node, Policy, Queue, Scenario, TopologyLevel
from gpu_policy.model.scenario_file import check_built


def needs_namespace_labels(pods: list[PodView]) -> bool:
    """Whether some GPU pod names no queue itself (then namespace labels are read)."""
    return any(p.asks_for_gpus and not p.deleting and not p.queue_label for p in pods)


def namespace_queues(labels: dict[str, dict[str, str]]) -> dict[str, str]:
    """Namespace -> the queue its label `gpu-policy.io/queue` names, for those that have one."""
    return {ns: mine[QUEUE_LABEL] for ns, mine in labels.items() if mine.get(QUEUE_LABEL)}


def needs_namespace_list(pods: list[PodView], queues: list[Queue]) -> bool:
    """Whether namespaces are LISTed: a pod's queue may come from its namespace's label, or
    a queue chooses its users by namespace label."""
    return needs_namespace_labels(pods) or any(q.namespace_selector for q in queues)


def _namespaces(jobs: list[Job], queues: list[Queue], labels: dict[str, dict[str, str]]) -> list[Namespace]:
    """The labels of the namespaces holding jobs, when a queue's namespace selector needs them."""
    if not any(q.namespace_selector for q in queues):
        return []
    held = sorted({j.name.partition("/")[0] for j in jobs if "/" in j.name})
    return [Namespace(ns, dict(labels[ns])) for ns in held if ns in labels]


@dataclass
class Snapshot:
    """The scenario of one observation, and what acting on its plan needs."""

    scenario: Scenario
    warnings: list[str] = field(default_factory=list)
    pods: dict[str, list[PodRef]] = field(default_factory=dict)  # job name -> its pods
    reservations: dict[str, Reservation] = field(default_factory=dict)  # job name -> the reservation standing for it
    stale: set[str] = field(default_factory=set)  # reservation keys that no longer stand (expired, bound, invalid)
    composed: ComposedNodes | None = None  # composition as this look found it (None: no composable node)
    marked: dict[str, list[PodRef]] = field(default_factory=dict)  # job -> its pods still marked preempted
    gated: dict[str, list[PodRef]] = field(default_factory=dict)  # job name -> its pods held by gpu-policy's gate
    incomplete: dict[str, str] = field(default_factory=dict)  # job name -> why it is not planned yet
    broken: dict[str, list[PodRef]] = field(default_factory=dict)  # broken gang -> its pods that hold GPUs
    held: dict[str, list[str]] = field(default_factory=dict)  # reserved job -> the nodes its pods already hold
    views: Mapping[str, PodView] = field(default_factory=dict)  # pod uid -> the pod as this look read it
    asked: dict[str, list[PodRef]] = field(default_factory=dict)  # job -> its pods asked to save or awaited


class ByUid(Mapping):
    """A look's pods by uid, indexed when first asked: only a round with victims asks (at
    21,000 pods the index costs 0.05-0.06 s of CPU, a fifth of the rest of a look)."""

    def __init__(self, pods: list[PodView]):
        self._pods = pods

    @cached_property
    def _index(self) -> dict[str, PodView]:
        return {p.uid: p for p in self._pods}

    def __getitem__(self, uid: str) -> PodView:
        return self._index[uid]

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def build_scenario(nodes: list[NodeView], pods: list[PodView], queues: list[Queue],
                   namespace_queues: dict[str, str], reservations: list[Reservation], now: float,
                   source: str, memo: LookMemo, composed: ComposedNodes | None = None,
                   namespace_labels: dict[str, dict[str, str]] | None = None,
                   pod_groups: dict[tuple[str, str, str], int] | None = None, policy: Policy = Policy(),
                   topology: list[TopologyLevel] = ()) -> Snapshot:
    """The scenario of one look; with `composed`, its nodes are the composable nodes as
    planned (gpu_policy.kubernetes.read.composable) and its section becomes `composable:`.
    `namespace_labels` (read when a queue chooses its users by label, `needs_namespace_list`):
    the labels of the namespaces that hold jobs go into the scenario's `namespaces:`;
    `pod_groups`: (namespace, API group, PodGroup name) -> its minMember (workloads.min_members);
    `policy`: the scenario's `policy:` (the queues ConfigMap's `policy.yaml`); `topology`: its
    `topology:` levels (gpu_policy.kubernetes.read.topology), the pods' requests read against them;
    `memo`: what the last look built (gpu_policy.kubernetes.read.memo), kept where unchanged."""
    if composed is not None:
        nodes = composed.nodes
    warnings: list[str] = []
    node_views = {n.name: n for n in nodes}
    pods = physical_requests(pods, {n.name: n.sharing for n in nodes if n.sharing},
                             {n.name: (n.mig, n.memory_gb) for n in nodes if n.mig},
                             {n.name: next(iter(n.mig)) for n in nodes if n.mig_single and n.mig})
    pods = with_pod_groups(pods, pod_groups or {})
    known = {q.name for q in queues}
    leaf = known - {q.parent for q in queues if q.parent}
    managed, unmanaged, terminating = _sort_pods(pods, node_views, namespace_queues, known, leaf, warnings)
    reserved = _live_reservations(reservations, managed, node_views, leaf, now, warnings)
    found = _managed_jobs(managed, reserved, namespace_queues, known, now, unmanaged, terminating, warnings, memo)
    jobs = found.jobs
    jobs += [_reservation_job(r) for r in reserved.values()]
    synthetic = _held_elsewhere(jobs, unmanaged, terminating)
    jobs.sort(key=lambda j: (j.submitted_at, j.name))  # oldest first: jobs without GPU indices take them in this order
    scenario_nodes = _nodes(node_views, jobs, pods, topology, warnings, memo)
    memo.end()
    _drop_bad_indices(scenario_nodes, jobs, warnings)
    scenario = Scenario(nodes=scenario_nodes, queues=list(queues) + synthetic, jobs=jobs, source=source,
                        namespaces=_namespaces(jobs, queues, namespace_labels or {}), policy=policy,
                        topology=list(topology))
    if composed is not None:
        warnings += composed.warnings
    check_built(scenario, composed.section if composed is not None else None, memo.unchecked)  # a file's checks
    memo.passed()
    return Snapshot(scenario, warnings, found.refs, reserved,
                    stale={r.key for r in reservations} - {r.key for r in reserved.values()}, composed=composed,
                    gated=found.gated, incomplete=found.incomplete, broken=found.broken, held=found.held)


@dataclass
class _Managed:
    """What the look's managed pods become, job by job (`Snapshot` has each field's meaning)."""

    jobs: list[Job] = field(default_factory=list)
    refs: dict[str, list[PodRef]] = field(default_factory=dict)
    gated: dict[str, list[PodRef]] = field(default_factory=dict)
    incomplete: dict[str, str] = field(default_factory=dict)
    broken: dict[str, list[PodRef]] = field(default_factory=dict)
    held: dict[str, list[str]] = field(default_factory=dict)


def _managed_jobs(managed: dict, reserved: dict[str, Reservation], namespace_queues: dict[str, str], known: set[str],
                  now: float, unmanaged: list[PodView], terminating: list[PodView], warnings: list[str],
                  memo: LookMemo) -> _Managed:
    """Each managed job: held by its reservation, a gang in trouble (broken: its pods join
    `terminating`; incomplete: not planned yet), or a job to plan (one `_job` cannot read
    joins `unmanaged`), kept from the last look where its pods are the same."""
    out = _Managed()
    memo.begin("jobs", (namespace_queues, known))
    for (namespace, group), members in sorted(managed.items()):
        name = f"{namespace}/{group}"
        waiting = [p for p in members if p.gated]
        if waiting:
            waiting.sort(key=lambda p: p.name)
            out.gated[name] = [p.ref for p in waiting]
        if name in reserved:  # the reservation stands for the job until all its pods hold GPUs
            out.held[name] = [p.node for p in members if p.node]
            if out.held[name] and waiting:
                warnings.append(f"job {name}: released part way: {len(out.held[name])} of its pods released, "
                                f"{len(waiting)} still gated; its reservation holds their GPUs until they are "
                                "released")
            continue
        trouble = gang_trouble(members)
        if trouble is not None:
            _gang_in_trouble(name, members, trouble, out, terminating, warnings)
            continue
        job, refs, moments = memo.get("jobs", name, tuple(members),
                                      lambda said: _job(name, members, namespace_queues, known, now, said), warnings)
        if job is None:
            unmanaged.extend(members)
            continue
        job = memo.retimed(job, ages(moments, now, bool(job.running)))  # kept: its ages as of now
        out.jobs.append(job)
        out.refs[name] = refs
    return out


def _gang_in_trouble(name: str, members: list[PodView], trouble: tuple[str, str], out: _Managed,
                     terminating: list[PodView], warnings: list[str]) -> None:
    """A broken gang's bound pods are evicted (they join `terminating`) so that it restarts
    whole; an incomplete one is not planned yet. Either way a warning says which and why."""
    verdict, words = trouble
    if verdict == "broken":
        out.broken[name] = [p.ref for p in members if p.node]
        terminating.extend(p for p in members if p.node)
    else:
        out.incomplete[name] = words
    then = "its pods are evicted so that it restarts whole" if verdict == "broken" else "not planned yet"
    warnings.append(f"job {name}: {verdict}: {words}; {then}")


def _sort_pods(pods: list[PodView], node_views: dict, namespace_queues: dict[str, str], known: set[str],
               leaf: set[str], warnings: list[str]):
    """GPU pods by what becomes of them: managed (by job), unmanaged, terminating."""
    managed: dict[tuple[str, str], list[PodView]] = defaultdict(list)
    unmanaged: list[PodView] = []
    terminating: list[PodView] = []
    why_unmanaged: dict[str, dict[str, list[PodView]]] = defaultdict(lambda: defaultdict(list))
    for pod in pods:
        if not pod.asks_for_gpus:
            continue
        if pod.node and pod.node not in node_views:
            warnings.append(f"pod {pod.full_name} is bound to node {pod.node}, which does not exist: left out")
            continue
        if pod.deleting:
            terminating.append(pod)
            continue
        queue = _queue_of(pod, namespace_queues, known)
        if pod.unreadable:
            warnings.append(f"pod {pod.full_name} {pod.unreadable}: counted as unmanaged")
            unmanaged.append(pod)
        elif queue not in leaf:
            why = ("no queue (label gpu-policy.io/queue or kai.scheduler/queue, on the pod or its namespace)"
                   if queue is None else f"queue {queue!r}, which is a department" if queue in known
                   else f"queue {queue!r}, which does not exist")
            why_unmanaged[pod.namespace][why].append(pod)
            unmanaged.append(pod)
        else:
            managed[(pod.namespace, pod.group)].append(pod)
    for namespace, reasons in sorted(why_unmanaged.items()):
        for why, held in reasons.items():
            gpus = sum(p.gpus for p in held if p.node)
            warnings.append(f"namespace {namespace}: {len(held)} GPU pod{'s' if len(held) > 1 else ''} with {why}: "
                            f"unmanaged, {gpus:g} GPUs counted as used and never touched")
    return managed, unmanaged, terminating


def _held_elsewhere(jobs: list[Job], unmanaged: list[PodView], terminating: list[PodView]) -> list[Queue]:
    """Jobs (added to `jobs`) and snapshot-only queues for GPUs held by pods gpu-policy may not touch."""
    taken = {j.name for j in jobs}
    synthetic = []
    for queue_name, held, deserve in ((UNMANAGED_QUEUE, unmanaged, True), (TERMINATING_QUEUE, terminating, False)):
        bound = [p for p in held if p.node and p.gpus > 0]  # an unreadable pod holds none of these GPUs
        if not bound:
            continue
        total = sum(p.gpus for p in bound)
        synthetic.append(Queue(name=queue_name, deserved=total if deserve else 0, limit=total if deserve else None,
                               over_quota_weight=1 if deserve else 0))
        for p in bound:
            name = p.full_name if p.full_name not in taken else f"{p.full_name}#pod"
            taken.add(name)
            jobs.append(Job(name=name, queue=queue_name, gpus=p.gpus, priority=p.priority, preemptible=False,
                            cpu=_round(p.cpu), memory_gib=_round(p.memory_gib), running=[p.node],
                            gpu_indices=[p.gpu_indices] if p.gpu_indices else None, submitted_at=_round(p.created)))
    return synthetic


def _queue_of(pod: PodView, namespace_queues: dict[str, str], known: set[str]) -> str | None:
    if pod.queue_label:
        return pod.queue_label
    if pod.namespace in namespace_queues:
        return namespace_queues[pod.namespace]
    return pod.namespace if pod.namespace in known else None


def _live_reservations(reservations: list[Reservation], managed: dict, node_views: dict, leaf: set[str], now: float,
                       warnings: list[str]) -> dict[str, Reservation]:
    """Reservations still standing: unexpired, for a known queue and nodes, pods not all bound yet."""
    live = {}
    for r in reservations:
        bound = sum(1 for p in managed.get((r.namespace, r.job), []) if p.node)
        if r.expires_at <= now or bound >= r.replicas:
            continue
        missing = [n for n in r.nodes if n not in node_views]
        if r.queue not in leaf or missing:
            what = f"queue {r.queue!r}" if r.queue not in leaf else f"node {missing[0]}"
            warnings.append(f"reservation {r.key}: {what} no longer exists: ignored")
            continue
        live[r.job_name] = r
    return live


def _reservation_job(r: Reservation) -> Job:
    return Job(name=r.job_name, queue=r.queue, gpus=r.gpus, replicas=r.replicas, priority=r.priority,
               running=list(r.nodes), gpu_indices=r.gpu_indices)


def _job(name: str, pods: list[PodView], namespace_queues: dict[str, str], known: set[str], now: float,
         warnings: list[str]) -> tuple[Job | None, list[PodRef] | None, Moments | None]:
    """One job from the pods of a gang as seen at `now`, its pods as the actuator names them, and
    when its planned pods started, were created and checkpointed (a later look that keeps the job
    counts its ages from them); None (with a warning) when the pods disagree."""
    first = pods[0]
    queue = _queue_of(first, namespace_queues, known)
    if not _agree(name, pods, queue, namespace_queues, known, warnings):
        return None, None, None
    bound = [p for p in pods if p.node]
    if bound and len(bound) < len(pods):
        warnings.append(f"job {name}: {len(bound)} of {len(pods)} pods are bound; planned as the bound part")
        planned = bound
    else:
        planned = pods
    preemptible = [p.preemptible for p in planned if p.preemptible is not None]
    job = Job(
        name=name, queue=queue, gpus=first.gpus, replicas=len(planned),
        priority=max(p.priority for p in planned), preemptible=min(preemptible) if preemptible else None,
        gpu_model=first.gpu_model, mig_profile=first.mig_profile, cpu=_most(p.cpu for p in planned),
        memory_gib=_most(p.memory_gib for p in planned), **_where_running(planned, bool(bound)),
        submitted_at=_round(min(p.created for p in planned)), **progress(planned, now, bool(bound)),
        **first.constraints, topology=first.topology,
    )
    refs = [p.ref for p in pods if p.node or not job.running]
    return job, refs, Moments.of(planned)


def _where_running(pods: list[PodView], bound: bool) -> dict:
    """The job's `running` nodes and `gpu_indices` (those only when every pod has them)."""
    if not bound:
        return {"running": [], "gpu_indices": None}
    indices = [p.gpu_indices for p in pods] if all(p.gpu_indices for p in pods) else None
    return {"running": [p.node for p in pods], "gpu_indices": indices}


def _agree(name: str, pods: list[PodView], queue: str, namespace_queues: dict[str, str], known: set[str],
           warnings: list[str]) -> bool:
    """Whether the pods of one job ask for the same GPUs in the same queue (`queue`, the first
    pod's) and the same topology levels; a warning names the first that does not."""
    first = pods[0]
    for p in pods[1:]:
        for what, mine, theirs in (("GPUs", p.gpus, first.gpus), ("queue", _queue_of(p, namespace_queues, known), queue),
                                   ("topology", words(p.topology), words(first.topology))):
            if mine != theirs:
                warnings.append(f"job {name}: pod {p.full_name} asks for {what} {mine}, pod {first.full_name} for "
                                f"{theirs}: the pods of one job must agree; counted as unmanaged")
                return False
    return True


def _nodes(views: dict[str, NodeView], jobs: list[Job], pods: list[PodView], topology: list[TopologyLevel],
           warnings: list[str], memo: LookMemo) -> list[Node]:
    """The scenario's nodes, in natural order of their names; each kept from the last look where
    its view, what its pods use there and the labels of it some job or topology level selects are
    the same."""
    held, need, others = _usage(jobs, pods)
    out = []
    # the labels jobs select by, and the levels' (a level labelled kubernetes.io/hostname is the node itself)
    selected = sorted(selected_labels(jobs) | ({level.label for level in topology} - {HOSTNAME_LABEL}))
    memo.begin("nodes", None)
    for v in sorted(views.values(), key=lambda v: _natural(v.name)):
        if v.gpus == 0 and not held[v.name] and v.max_gpus is None:
            continue  # no GPUs, and none to come: nothing to plan there
        used = (held[v.name], need[v.name]["cpu"], need[v.name]["memory_gib"], others[v.name]["cpu"],
                others[v.name]["memory_gib"], tuple((k, v.labels[k]) for k in selected if k in v.labels))
        node, = memo.get("nodes", v.name, (v, *used), lambda said: (_node(v, *used, said),), warnings)
        out.append(node)
    return out


def _node(v: NodeView, held: float, cpu_need: float, memory_need: float, cpu_others: float, memory_others: float,
          selectable: tuple[tuple[str, str], ...], warnings: list[str]) -> Node:
    """One node of the scenario: its view, less what its pods that ask for no GPU take, with the
    labels of it some job selects."""
    gpus, unhealthy, labels = v.gpus, list(v.unhealthy_gpus), {}
    if held > v.gpus + 1e-9:
        warnings.append(f"node {v.name}: its pods hold {held:g} GPUs but it offers {v.gpus}: "
                        "planned full, with no new work")
        gpus, labels[NO_NEW_WORK_LABEL] = math.ceil(held), "overcommitted"
    if v.no_new_work:
        labels[NO_NEW_WORK_LABEL] = v.no_new_work
    if labels:
        unhealthy = list(range(gpus))
    labels.update(selectable)
    capacity = {}
    for resource, total, others, need in (("cpu", v.cpu, cpu_others, cpu_need),
                                          ("memory_gib", v.memory_gib, memory_others, memory_need)):
        if total is not None:  # what non-GPU pods leave, never less than the GPU jobs there already use
            capacity[resource] = _round(max(total - others, need))
    return Node(name=v.name, gpus=gpus, gpu_model=v.gpu_model, cpu=capacity.get("cpu"),
                memory_gib=capacity.get("memory_gib"), labels=labels, unhealthy_gpus=unhealthy,
                taints=list(v.taints), gpu_sharing=v.sharing, mig=dict(v.mig))


def _usage(jobs: list[Job], pods: list[PodView]) -> tuple[dict, dict, dict]:
    """Per node: the GPUs the jobs running there hold, the CPU and memory they need, and the CPU
    and memory the pods that ask for no GPU take."""
    held: dict[str, float] = defaultdict(float)
    need = defaultdict(lambda: {"cpu": 0.0, "memory_gib": 0.0})
    for job in jobs:
        for n in job.running:
            held[n] += job.gpus
            need[n]["cpu"] += job.cpu or 0
            need[n]["memory_gib"] += job.memory_gib or 0
    others = defaultdict(lambda: {"cpu": 0.0, "memory_gib": 0.0})
    for p in pods:
        if p.node and not p.asks_for_gpus:
            others[p.node]["cpu"] += p.cpu or 0
            others[p.node]["memory_gib"] += p.memory_gib or 0
    return held, need, others


def _drop_bad_indices(nodes: list[Node], jobs: list[Job], warnings: list[str]) -> None:
    """GPU index annotations that collide or point past a node's GPUs are dropped for that node."""
    size = {n.name: n.gpus for n in nodes}
    use: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    bad = set()
    for job in jobs:
        for node, ix in zip(job.running, job.gpu_indices or []):
            want = 1 if job.is_fractional else int(job.gpus)
            if len(ix) != want or len(set(ix)) != len(ix) or any(i >= size[node] for i in ix):
                bad.add(node)
            for i in ix:
                use[node][i] += job.gpus if job.is_fractional else 1.0
                if use[node][i] > 1 + 1e-9:
                    bad.add(node)
    for node in sorted(bad):
        warnings.append(f"node {node}: the {GPU_INDEX_ANNOTATION} annotations of its pods do not fit its GPUs: ignored")
        for i, job in enumerate(jobs):
            if node in job.running:  # a new job: the last look's may be kept for the next (read.memo)
                jobs[i] = dataclasses.replace(job, gpu_indices=None)


def _most(values) -> float | None:
    """The largest of the values that are known (a replica's request in a gang)."""
    known = [v for v in values if v is not None]
    return _round(max(known)) if known else None


def _round(value: float | None) -> float | None:
    if value is None:
        return None
    rounded = round(value, 3)
    return int(rounded) if float(rounded).is_integer() else rounded


@lru_cache(maxsize=1 << 16)
def _natural(name: str) -> tuple:
    """node-2 before node-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
