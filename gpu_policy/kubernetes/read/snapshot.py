"""Cluster objects -> Scenario: the "Reading" half of the contract (docs/kubernetes.md).

`build_scenario` takes what one observation read (nodes, the pods as the look's stages left them,
queues, namespace labels, reservations) and returns the scenario the planner sees, with warnings
a person should read. It does no I/O. What becomes of each pod and each job of pods:
gpu_policy.kubernetes.read.pod_jobs; of each node: gpu_policy.kubernetes.read.scenario_nodes.
What it decides where the contract is silent:

- GPUs held by pods gpu-policy may not touch (no queue: *unmanaged*; being deleted:
  *terminating*) become non-preemptible jobs of two snapshot-only queues. Unmanaged
  GPUs are a lasting drain: that queue deserves exactly what it holds, so the teams
  share the rest. Terminating GPUs come back soon: that queue deserves nothing and
  weighs nothing, so fair shares stay as they are and nobody is evicted twice.
- A gang's reservation stands for it (all its GPUs held) until all its pods are bound, while it
  has not expired and names known nodes and a queue.

A look's order is the pods' (namespace, name) and the jobs' (submitted_at, name); everything is
kept in the memo from look to look (gpu_policy.kubernetes.read.memo), made again where it changed.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Callable

from gpu_policy.kubernetes.names import GPU_INDEX_ANNOTATION, QUEUE_LABEL, TERMINATING_QUEUE, UNMANAGED_QUEUE
from gpu_policy.kubernetes.read.composable import ComposedNodes
from gpu_policy.kubernetes.read.kept import Key, Stage
from gpu_policy.kubernetes.read.kept_jobs import GroupMade, Groups, Jobs
from gpu_policy.kubernetes.read.memo import LookMemo
from gpu_policy.kubernetes.read.pod_jobs import SortContext, make_group, queue_of, rounded, sort_pod
from gpu_policy.kubernetes.read.pods import PodRef, PodView
from gpu_policy.kubernetes.read.reservations import Reservation
from gpu_policy.kubernetes.read.scenario_nodes import NodeFacts, ScenarioNodes
from gpu_policy.model import Job, Namespace, Policy, Queue, Scenario, TopologyLevel
from gpu_policy.model.scenario_file import check_built, check_changed


def needs_namespace_label(pod: PodView) -> bool:
    """Whether the GPU pod names no queue itself (then namespace labels are read)."""
    return pod.asks_for_gpus and not pod.deleting and not pod.queue_label


def namespace_queues(labels: dict[str, dict[str, str]]) -> dict[str, str]:
    """Namespace -> the queue its label `gpu-policy.io/queue` names, for those that have one."""
    return {ns: mine[QUEUE_LABEL] for ns, mine in labels.items() if mine.get(QUEUE_LABEL)}


@dataclass
class Snapshot:
    """The scenario of one observation, and what acting on its plan needs."""

    scenario: Scenario
    warnings: list[str] = field(default_factory=list)
    pods: dict[str, list[PodRef]] = field(default_factory=dict)  # job name -> its pods (in no order)
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
    terminating_held: dict[str, float] = field(default_factory=dict)  # queue -> GPUs its pods being deleted hold


class ByUid(Mapping):
    """A look's pods by uid, listed and indexed when first asked: only a round with victims asks
    (at 21,000 pods the index costs 0.05-0.06 s of CPU)."""

    def __init__(self, pods: Callable[[], list[PodView]]):
        self._pods = pods

    @cached_property
    def _index(self) -> dict[str, PodView]:
        return {p.uid: p for p in self._pods()}

    def __getitem__(self, uid: str) -> PodView:
        return self._index[uid]

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def build_scenario(memo: LookMemo, changes: dict[Key, PodView | None], facts: NodeFacts, queues: list[Queue],
                   namespace_queues: dict[str, str], reservations: list[Reservation], now: float, source: str,
                   composed: ComposedNodes | None = None, namespace_labels: dict[str, dict[str, str]] | None = None,
                   pod_groups: dict[tuple[str, str, str], int] | None = None, policy: Policy = Policy(),
                   topology: list[TopologyLevel] = ()) -> Snapshot:
    """The scenario of one look of `memo`, whose pods changed by `changes` since its last (key ->
    the pod now, None: gone), on the nodes of `facts`; with `composed`, those are the composable
    nodes as planned (gpu_policy.kubernetes.read.composable) and its section becomes `composable:`.
    `namespace_labels` (read when a queue chooses its users by label): the labels of the
    namespaces that hold jobs go into the scenario's `namespaces:`; `pod_groups`: (namespace,
    API group, PodGroup name) -> its minMember (workloads.min_members); `policy`: the scenario's
    `policy:` (the queues ConfigMap's `policy.yaml`); `topology`: its `topology:` levels
    (gpu_policy.kubernetes.read.topology), the pods' requests read against them."""
    warnings: list[str] = []
    known = {q.name for q in queues}
    leaf = known - {q.parent for q in queues if q.parent}
    groups: Groups = memo.kept("groups", Groups)
    pods: Stage = memo.kept("sorted", lambda: Stage(sort_pod, groups))
    pods.update(changes, SortContext(facts.devices, pod_groups or {}, facts.names, namespace_queues, known, leaf))
    warnings += pods.lines() + _unmanaged_said(groups)
    reserved = _live_reservations(reservations, groups, facts.names, leaf, now, warnings)
    jobs: Jobs = memo.kept("jobs", Jobs)
    made_of = partial(make_group, namespace_queues=namespace_queues, known=known, now=now)
    for before, after in groups.remake(set(reserved), (namespace_queues, known), made_of):
        jobs.put((after or before).name, after and after.job, after and after.moments)
    special = groups.special_ones()
    warnings += [line for g in special for line in g.lines]
    _put_reservations(memo.kept("reservations", dict), jobs, reserved)
    terminating = _terminating(groups, special)
    synthetic = _held_elsewhere(memo.kept("held elsewhere", dict), jobs, groups, special, terminating, reserved)
    aged = jobs.age(now)
    listed = jobs.listed()
    made: ScenarioNodes = memo.kept("nodes", ScenarioNodes)
    scenario_nodes, remade = made.update(facts, jobs, groups.others, groups.moved, topology, warnings)
    dropped = _drop_bad_indices(made.bad, jobs, listed, warnings)
    scenario = Scenario(nodes=scenario_nodes, queues=list(queues) + synthetic, jobs=listed, source=source,
                        namespaces=_namespaces(jobs, queues, namespace_labels or {}), policy=policy,
                        topology=list(topology))
    if composed is not None:
        warnings += composed.warnings
    _check(memo, scenario, composed, jobs, dropped, made, remade, aged)
    jobs.checked()
    groups.moved.clear()
    return Snapshot(scenario, warnings, dict(groups.refs), reserved,
                    stale={r.key for r in reservations} - {r.key for r in reserved.values()}, composed=composed,
                    terminating_held=_held_by_queue(terminating, namespace_queues, known, leaf), **_held_back(special))


def _held_back(special: list[GroupMade]) -> dict:
    """The Snapshot's jobs held back, from the jobs that are not plain: gated, incomplete, broken, held."""
    return {"gated": {g.name: g.gated for g in special if g.gated},
            "incomplete": {g.name: g.incomplete for g in special if g.incomplete is not None},
            "broken": {g.name: g.broken for g in special if g.broken is not None},
            "held": {g.name: g.held for g in special if g.held is not None}}


def _check(memo: LookMemo, scenario: Scenario, composed: ComposedNodes | None, jobs: Jobs, dropped: list[Job],
           made: ScenarioNodes, remade: set[str], aged: dict[str, tuple[int, int]]) -> None:
    """A file's checks: on the memo's first look, of the whole scenario; then of what changed
    (the jobs and nodes made anew, the nodes whose running jobs changed, the ages set anew)."""
    section = composed.section if composed is not None else None
    if not memo.checked:
        check_built(scenario, section)
    else:
        replaced = {j.name: j for j in dropped}
        fresh = [j for j in jobs.fresh if jobs.now.get(j.name) is j and j.name not in replaced] + dropped
        loaded = sorted(remade | jobs.moved | {n for j in dropped for n in j.running})
        nodes = {name: made.made[name][1] for name in loaded if made.made.get(name, (None, None))[1] is not None}
        loads = [(node, [replaced.get(job) or jobs.now[job] for job in jobs.running_on(name)])
                 for name, node in nodes.items()]
        check_changed(scenario, section, fresh, [nodes[name] for name in sorted(remade) if name in nodes], loads, aged)
    memo.checked = True


def _unmanaged_said(groups: Groups) -> list[str]:
    """One warning per namespace and reason of the GPU pods unmanaged for their queue: how many,
    and the GPUs those bound hold."""
    why_unmanaged: dict[str, dict[str, list[PodView]]] = {}
    for key in sorted(groups.unmanaged):
        s = groups.unmanaged[key]
        if s.why is not None:
            why_unmanaged.setdefault(s.view.namespace, {}).setdefault(s.why, []).append(s.view)
    out = []
    for namespace, reasons in sorted(why_unmanaged.items()):
        for why, held in reasons.items():
            gpus = sum(p.gpus for p in held if p.node)
            out.append(f"namespace {namespace}: {len(held)} GPU pod{'s' if len(held) > 1 else ''} with {why}: "
                       f"unmanaged, {gpus:g} GPUs counted as used and never touched")
    return out


def _live_reservations(reservations: list[Reservation], groups: Groups, nodes: frozenset[str], leaf: set[str],
                       now: float, warnings: list[str]) -> dict[str, Reservation]:
    """Reservations still standing: unexpired, for a known queue and nodes, pods not all bound yet."""
    live = {}
    for r in reservations:
        bound = sum(1 for p in groups.members.get((r.namespace, r.job), {}).values() if p.node)
        if r.expires_at <= now or bound >= r.replicas:
            continue
        missing = [n for n in r.nodes if n not in nodes]
        if r.queue not in leaf or missing:
            what = f"queue {r.queue!r}" if r.queue not in leaf else f"node {missing[0]}"
            warnings.append(f"reservation {r.key}: {what} no longer exists: ignored")
            continue
        live[r.job_name] = r
    return live


def _put_reservations(kept: dict[str, tuple[Reservation, Job]], jobs: Jobs, reserved: dict[str, Reservation]) -> None:
    """The job each standing reservation stands for (the one kept while the reservation is the same)."""
    made = {}
    for name, r in reserved.items():
        was = kept.get(name)
        made[name] = was if was is not None and was[0] == r else (r, Job(
            name=r.job_name, queue=r.queue, gpus=r.gpus, replicas=r.replicas, priority=r.priority,
            running=list(r.nodes), gpu_indices=r.gpu_indices))
    _put_kept(kept, made, jobs)


def _terminating(groups: Groups, special: list[GroupMade]) -> list[PodView]:
    """The pods being deleted, and those of broken gangs."""
    return [groups.terminating[k] for k in sorted(groups.terminating)] + [p for g in special for p in g.terminating]


def _held_by_queue(pods: list[PodView], namespace_queues: dict[str, str], known: set[str], leaf: set[str]
                   ) -> dict[str, float]:
    """The GPUs the bound `pods` hold, by the queue each belongs to (none: of no queue)."""
    held: dict[str, float] = {}
    for p in pods:
        queue = queue_of(p, namespace_queues, known)
        if p.node and p.gpus > 0 and queue in leaf:
            held[queue] = held.get(queue, 0.0) + p.gpus
    return held


def _held_elsewhere(kept: dict[str, tuple[PodView, str, Job]], jobs: Jobs, groups: Groups, special: list[GroupMade],
                    terminating: list[PodView], reserved: dict[str, Reservation]) -> list[Queue]:
    """Jobs (put into `jobs`, each kept while its pod is the same) and snapshot-only queues for
    GPUs held by pods gpu-policy may not touch: unmanaged (for their queue, or in a job whose pods
    disagree) and `terminating` (being deleted, or of a broken gang)."""
    unmanaged = [groups.unmanaged[k].view for k in sorted(groups.unmanaged)] + [p for g in special for p in g.unmanaged]
    synthetic, made = [], {}
    for queue_name, held, deserve in ((UNMANAGED_QUEUE, unmanaged, True), (TERMINATING_QUEUE, terminating, False)):
        bound = [p for p in held if p.node and p.gpus > 0]  # an unreadable pod holds none of these GPUs
        if not bound:
            continue
        total = sum(p.gpus for p in bound)
        synthetic.append(Queue(name=queue_name, deserved=total if deserve else 0, limit=total if deserve else None,
                               over_quota_weight=1 if deserve else 0))
        for p in bound:  # named as the pod, unless a job or a reservation is
            taken = p.full_name in reserved or p.full_name in groups.refs
            name = f"{p.full_name}#pod" if taken else p.full_name
            made[name] = _pod_job(kept.get(name), p, queue_name, name)
    _put_kept(kept, made, jobs)
    return synthetic


def _pod_job(was: tuple[PodView, str, Job] | None, p: PodView, queue: str, name: str) -> tuple[PodView, str, Job]:
    """The job of a pod gpu-policy may not touch in the snapshot-only queue: the one `was` while
    the pod is the same."""
    if was is not None and was[0] is p and was[1] == queue:
        return was
    return p, queue, Job(name=name, queue=queue, gpus=p.gpus, priority=p.priority, preemptible=False,
                         cpu=rounded(p.cpu), memory_gib=rounded(p.memory_gib), running=[p.node],
                         gpu_indices=[p.gpu_indices] if p.gpu_indices else None, submitted_at=rounded(p.created))


def _put_kept(kept: dict[str, tuple], made: dict[str, tuple], jobs: Jobs) -> None:
    """`made` (name -> what a job is made from, and the job last) is what `kept` holds from now on,
    and its jobs stand for their names in `jobs`; a name no longer made is gone from `jobs`, unless
    another job took it meanwhile."""
    for name in set(kept) - set(made):
        if jobs.built.get(name) is kept.pop(name)[-1]:
            jobs.put(name, None)
    for name, entry in made.items():
        kept[name] = entry
        if jobs.built.get(name) is not entry[-1]:
            jobs.put(name, entry[-1])


def _drop_bad_indices(bad: set[str], jobs: Jobs, listed: list[Job], warnings: list[str]) -> list[Job]:
    """GPU index annotations that collide or point past a node's GPUs are dropped for that node:
    each job running there is a copy without them (in `listed`); the copies."""
    if not bad:
        return []
    order = jobs.order.keys()
    dropped: dict[str, Job] = {}
    for node in sorted(bad):
        warnings.append(f"node {node}: the {GPU_INDEX_ANNOTATION} annotations of its pods do not fit its GPUs: ignored")
        for name in jobs.running_on(node):
            i = bisect.bisect_left(order, (jobs.built[name].submitted_at, name))
            listed[i] = dropped[name] = dataclasses.replace(listed[i], gpu_indices=None)
    return list(dropped.values())


def _namespaces(jobs: Jobs, queues: list[Queue], labels: dict[str, dict[str, str]]) -> list[Namespace]:
    """The labels of the namespaces holding jobs, when a queue's namespace selector needs them."""
    if not any(q.namespace_selector for q in queues):
        return []
    return [Namespace(ns, dict(labels[ns])) for ns in sorted(jobs.namespaces) if ns in labels]
