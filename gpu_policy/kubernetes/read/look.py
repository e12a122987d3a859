"""One look at a cluster's objects -> its Snapshot: the mapping both the one-shot commands
(objects LISTed now) and the controller (objects from its informer cache) use, so a
snapshot of the cache is what `gpu-policy snapshot` prints.

`reads` answers the few reads a look needs besides nodes and pods (`Reads`). KubeClient
asks the API server; the controller's cache answers from memory. Namespaces, KAI queues, the
composable and usage ConfigMaps, ComposabilityRequests, DRA objects, PodGroups, TrainJobs and
Kueue Topologies are read only when the look needs them (a policy that keeps usage, a pod with
resourceClaims, a pod naming a PodGroup, a JobSet's pod, a pod with topology annotations). The
leader passes its own usage history instead of the usage ConfigMap (`usage`).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Protocol

from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.read.composable import ComposedNodes, compose_nodes, settings_from_config_map
from gpu_policy.kubernetes.read.settle import DevicePluginLag
from gpu_policy.kubernetes.read.dra import DraView, publishes_gpus, read_dra, with_dra, with_dra_nodes
from gpu_policy.kubernetes.read.isolate import ObjectWarning, beyond_bounds, read_each
from gpu_policy.kubernetes.read.kept import Counts, Diff, Made, Stage
from gpu_policy.kubernetes.read.memo import LookMemo
from gpu_policy.kubernetes.names import (COMPOSABLE_CONFIGMAP, COMPOSABLE_KEY, COSCHEDULING_GROUP, KAI_GROUP,
                                         QUEUES_CONFIGMAP, QUEUES_KEY, RESERVATIONS_CONFIGMAP, USAGE_CONFIGMAP,
                                         VOLCANO_GROUP)
from gpu_policy.kubernetes.read.nodes import NodeView
from gpu_policy.kubernetes.read.pods import PodRef, PodView
from gpu_policy.kubernetes.read.queues import (policy_from_config_map, queues_from_config_map, queues_from_kai,
                                               topology_from_config_map)
from gpu_policy.kubernetes.read.requests import read_request
from gpu_policy.kubernetes.read.reservations import read_reservations
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.read.shape import (DEVICE_CLASS, DEVICE_TAINT_RULE, POD_GROUP, RESOURCE_CLAIM,
                                         RESOURCE_CLAIM_TEMPLATE, RESOURCE_SLICE, TRAIN_JOB)
from gpu_policy.kubernetes.read.scenario_nodes import NodeFacts
from gpu_policy.kubernetes.read.snapshot import ByUid, Snapshot, build_scenario, namespace_queues, needs_namespace_label
from gpu_policy.kubernetes.read.topology import asks_for_topology, hierarchy, named_topology, with_topology
from gpu_policy.kubernetes.read.usage import UsageLook, read_usage, with_usage
from gpu_policy.kubernetes.read.workloads import min_members, node_counts, started_train_job, with_train_job
from gpu_policy.model import Policy, Queue, TopologyLevel


class Reads(Protocol):
    def read_config_map(self, name: str) -> dict | None: ...
    def list_kai_queues(self) -> list[dict] | None: ...
    def list_namespaces(self) -> list[dict]: ...
    def list_composability_requests(self) -> list[dict] | None: ...
    def list_resource_slices(self) -> list[dict] | None: ...
    def list_resource_claims(self) -> list[dict] | None: ...
    def list_resource_claim_templates(self) -> list[dict] | None: ...
    def list_device_classes(self) -> list[dict] | None: ...
    def list_device_taint_rules(self) -> list[dict] | None: ...
    def list_kai_pod_groups(self) -> list[dict] | None: ...
    def list_volcano_pod_groups(self) -> list[dict] | None: ...
    def list_coscheduling_pod_groups(self) -> list[dict] | None: ...
    def list_train_jobs(self) -> list[dict] | None: ...
    def list_kueue_topologies(self) -> list[dict] | None: ...


def look(reads: Reads, settings: KubernetesSettings, nodes: list[NodeView], pods: list[PodView], now: float,
         source: str, lag: DevicePluginLag, bad: list[ObjectWarning] = (),
         usage: UsageLook | None = None,
         memo: LookMemo | None = None) -> tuple[Snapshot, list[str], list[ObjectWarning]]:
    """The snapshot of these nodes and pods; the warnings of reading the rest (one line
    each, the objects left out first); and the objects left out or left waiting (`bad`,
    the nodes and pods that could not be read, and the pods no node could ever hold).
    `usage`: the queues' usage history (the leader's); None reads the usage ConfigMap as it is.
    `memo`: what the last look made, for the controller's looks (gpu_policy.kubernetes.read.memo);
    each pod goes through the stages below, made again only where it changed."""
    memo = memo if memo is not None else LookMemo()
    memo.begin()
    bad = list(bad)
    changes = memo.kept("pod list", lambda: Diff(attrgetter("namespace", "name")))(pods)
    placed = _stage(memo, "placed")
    claims: Counts = memo.kept("claims", lambda: Counts(_claims, "claims", "templates"))
    for key, pod in changes.items():  # the pods as read: placed's inputs
        claims.count(key, placed.inputs.get(key), pod)
    dra = _dra(reads, claims, pods, bad)
    if dra is not None:
        nodes = with_dra_nodes(nodes, dra)
    facts = memo.kept("node facts", NodeFacts).update(nodes)
    changes = placed.update(changes, (dra, settings.gpu_resource, facts.most))
    bad += placed.bad()
    pod_groups = _pod_groups(reads, set(placed.counts["pod_groups"]), bad)
    train_jobs = _train_jobs(reads, bool(placed.counts["train_jobs"]), bad)
    queues, policy, config_levels, warnings = _queues(reads, settings, facts.gpus)
    gpu_h, said = usage(policy, now) if usage is not None else _usage(reads, settings, policy, now)
    queues, ignored = with_usage(queues, gpu_h, settings.namespace)
    warnings += ignored + said
    levels, choosing = hierarchy(config_levels, f"ConfigMap {settings.namespace}/{QUEUES_CONFIGMAP}",
                                 reads.list_kueue_topologies, settings.topology, bool(placed.counts["topology"]),
                                 set(placed.counts["named"]))
    timed = _stage(memo, "timed")
    changes = timed.update(changes, (train_jobs, frozenset(placed.counts["started"]), levels))
    bad += timed.bad()
    warnings += choosing + timed.lines()
    warnings += dra.warnings if dra is not None else []
    reservations, unreadable = read_reservations(reads.read_config_map(RESERVATIONS_CONFIGMAP))
    warnings += unreadable.values()
    selects = bool(timed.counts["labels"]) or any(q.namespace_selector for q in queues)
    labels = _namespace_labels(reads) if selects else {}
    composed = _composition(reads, settings, nodes, facts.composable, now, lag, warnings)
    if composed is not None:  # the nodes planned
        facts = memo.kept("composed node facts", NodeFacts).update(composed.nodes)
    snap = build_scenario(memo, changes, facts, queues, namespace_queues(labels), reservations, now, source,
                          composed, labels, pod_groups, policy, levels.levels)
    snap.stale |= set(unreadable)  # gpu-policy's own, yet unreadable: dropped at the next write
    sorts = memo.kept("sorted", None)  # made by build_scenario
    # a broken gang's pods are evicted, not unmarked
    snap.marked = _carrying(timed, sorts, timed.counts["marked"], snap)
    snap.asked = _carrying(timed, sorts, timed.counts["asked"], snap)
    made = dict(timed.made)
    snap.views = ByUid(lambda: [m.passed for _, m in sorted(made.items()) if m.passed is not None])
    memo.end()
    return snap, [b.line() for b in bad] + warnings, bad


#: The stages of a look, each made on a memo's first look: what each does to one pod, and what
#: the look counts of the pods it passes on (gpu_policy.kubernetes.read.kept)
_STAGES = {
    # with the GPUs its DRA claims hold or ask for, within what a scenario may describe: the PodGroup
    # kinds, TrainJobs and topologies the pods name
    "placed": lambda: Stage(_placed, counts=Counts(_placed_counts, "pod_groups", "train_jobs", "started", "topology",
                                                   "named")),
    # its TrainJob's size and its topology request: whether its namespace's labels are needed, and
    # the pods marked preempted or asked to save (not on their way out)
    "timed": lambda: Stage(_timed, counts=Counts(_timed_counts, "labels", "marked", "asked")),
}


def _claims(key: tuple[str, str], p: PodView) -> tuple:
    """Whether the pod, as read, has resourceClaims, and claims of a template not made yet."""
    return (True if p.claims else None,
            True if any(claim is None for claim, _ in p.claims) else None)


def _placed_counts(key: tuple[str, str], p: PodView) -> tuple:
    gpus = p.asks_for_gpus
    return (p.pod_group[0] if p.pod_group and gpus else None,
            True if p.train_job and p.gang and gpus else None,
            started_train_job(p),
            True if asks_for_topology(p) else None,
            named_topology(p))


def _timed_counts(key: tuple[str, str], p: PodView) -> tuple:
    leaving = p.deleting
    return (True if needs_namespace_label(p) else None,
            key if p.marked and not leaving else None,
            key if (p.checkpoint_requested is not None or p.checkpoint_awaited is not None) and not leaving else None)


def _stage(memo: LookMemo, name: str) -> Stage:
    return memo.kept(name, _STAGES[name])


def _placed(pod: PodView, context: tuple[DraView | None, str, dict[str, float]]) -> Made:
    """The pod with the GPUs its DRA claims hold or ask for; or the warning that leaves it
    waiting: it asks more than any node may ever hold."""
    dra, gpu_resource, most = context
    if dra is not None:
        pod = with_dra(pod, dra)
    beyond = beyond_bounds(pod, most, gpu_resource)
    return Made(pod) if beyond is None else Made(None, (beyond,))


def _timed(pod: PodView, context: tuple) -> Made:
    """The pod sized by its TrainJob, its topology request read against the levels."""
    train_jobs, started, levels = context
    kept, left_out, line = with_topology(with_train_job(pod, train_jobs, started), levels)
    return Made(kept, (left_out,) if left_out else (), (line,) if line else ())


def _queues(reads: Reads, settings: KubernetesSettings,
            cluster_gpus: int) -> tuple[list[Queue], Policy, list[TopologyLevel] | None, list[str]]:
    """The queues ConfigMap when it exists (or must), else KAI-Scheduler's Queue objects; the
    policy and the topology levels of the ConfigMap (KAI's queues: the defaults, and no levels:
    None, they come from a Kueue Topology)."""
    mode = settings.queues
    if mode != "kai":
        config_map = reads.read_config_map(QUEUES_CONFIGMAP)
        if config_map is not None:
            return (queues_from_config_map(config_map), policy_from_config_map(config_map),
                    topology_from_config_map(config_map), [])
        if mode == "configmap":
            raise ClusterObjectError(f"ConfigMap {settings.namespace}/{QUEUES_CONFIGMAP}", "",
                                     f"does not exist: create it with a {QUEUES_KEY} key (deploy/examples/queues.yaml)")
    kai = reads.list_kai_queues()
    if not kai:
        return [], Policy(), None, [f"no queues: neither the ConfigMap {settings.namespace}/{QUEUES_CONFIGMAP} nor "
                                    "KAI-Scheduler Queue objects exist, so every GPU pod is unmanaged "
                                    "(docs/kubernetes.md)"]
    return queues_from_kai(kai, cluster_gpus), Policy(), None, []


def _usage(reads: Reads, settings: KubernetesSettings, policy: Policy,
           now: float) -> tuple[dict[str, float], list[str]]:
    """A one-shot look's usage history: the usage ConfigMap as it is, decayed to `now`, read only
    when the policy keeps usage (sets `usage_half_life_s`)."""
    if policy.usage_half_life_s is None:
        return {}, []
    read = read_usage(reads.read_config_map(USAGE_CONFIGMAP), now, policy.usage_half_life_s, settings.namespace)
    return read.history.gpu_h, [read.problem] if read.problem else []


def _namespace_labels(reads: Reads) -> dict[str, dict[str, str]]:
    """Namespace -> its labels; a namespace whose fields have the wrong types reads as unlabelled."""
    out = {}
    for ns in reads.list_namespaces():
        meta = ns.get("metadata") if isinstance(ns, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        out[meta["name"]] = {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
    return out


def _dra(reads: Reads, claims: Counts, pods: list[PodView], bad: list[ObjectWarning]) -> DraView | None:
    """DRA as the cluster has it. ResourceSlices are always LISTed (a DRA-only node's GPUs are
    capacity whether or not a pod claims them; one 404 where resource.k8s.io/v1 is not served);
    DeviceTaintRules when a slice publishes NVIDIA GPUs (their taints take GPUs out of that
    capacity); ResourceClaims and DeviceClasses only when some pod has resourceClaims (`claims`
    counts them), and ResourceClaimTemplates when a pod's claim is not made yet. An object of
    the wrong shape is left out with a warning in `bad`. None when no slice publishes GPUs and no
    pod has claims."""
    def listed(kind: str, schema: dict, objects: list[dict] | None) -> list[dict]:
        objects, warnings = read_each(objects or [], kind, schema, lambda o: o)
        bad.extend(warnings)
        return objects

    claimed = bool(claims["claims"])
    slices = listed("ResourceSlice", RESOURCE_SLICE, reads.list_resource_slices())
    if not claimed and not publishes_gpus(slices):
        return None
    templates = (listed("ResourceClaimTemplate", RESOURCE_CLAIM_TEMPLATE, reads.list_resource_claim_templates())
                 if claims["templates"] else [])
    claims = listed("ResourceClaim", RESOURCE_CLAIM, reads.list_resource_claims()) if claimed else []
    classes = listed("DeviceClass", DEVICE_CLASS, reads.list_device_classes()) if claimed else []
    return read_dra(slices, claims, templates, classes, pods,
                    listed("DeviceTaintRule", DEVICE_TAINT_RULE, reads.list_device_taint_rules()))


def _pod_groups(reads: Reads, apis: set[str], bad: list[ObjectWarning]) -> dict[tuple[str, str, str], int]:
    """The minMember of PodGroups: one LIST per PodGroup kind that some GPU pod names (`apis`);
    a PodGroup of the wrong shape is left out with a warning in `bad`."""
    lists = {KAI_GROUP: reads.list_kai_pod_groups, VOLCANO_GROUP: reads.list_volcano_pod_groups,
             COSCHEDULING_GROUP: reads.list_coscheduling_pod_groups}
    sizes: dict[tuple[str, str, str], int] = {}
    for api in sorted(apis):
        groups, warnings = read_each(lists[api]() or [], f"PodGroup ({api})", POD_GROUP, lambda o: o)
        bad.extend(warnings)
        sizes.update(min_members(api, groups))
    return sizes


def _train_jobs(reads: Reads, named: bool, bad: list[ObjectWarning]) -> dict[tuple[str, str], int]:
    """The node count of TrainJobs: one LIST when some GPU pod of a gang belongs to a JobSet
    (`named`; a TrainJob's is named as it); a TrainJob of the wrong shape is left out with a
    warning in `bad`."""
    if not named:
        return {}
    jobs, warnings = read_each(reads.list_train_jobs() or [], "TrainJob", TRAIN_JOB, lambda o: o)
    bad.extend(warnings)
    return node_counts(jobs)


def _composition(reads: Reads, settings: KubernetesSettings, nodes: list[NodeView], composable: list[str],
                 now: float, lag: DevicePluginLag, warnings: list[str]) -> ComposedNodes | None:
    """Composition as the cluster has it: None unless a node is labelled composable (`composable`)
    and the composable ConfigMap and the operator's CRD exist."""
    if not composable:
        return None
    where = f"ConfigMap {settings.namespace}/{COMPOSABLE_CONFIGMAP}"
    config_map = reads.read_config_map(COMPOSABLE_CONFIGMAP)
    if config_map is None:
        warnings.append(f"nodes {', '.join(composable[:5])} are labelled composable, but {where} does not exist: "
                        f"no GPUs are attached or detached (docs/composition.md)")
        return None
    composition = settings_from_config_map(config_map)
    listed = reads.list_composability_requests()
    if listed is None:
        warnings.append(f"{where} exists, but the cluster has no ComposabilityRequest resource (is the CDI "
                        "operator installed?): no GPUs are attached or detached")
        return None
    requests = [r for r in map(read_request, listed) if r is not None]
    return compose_nodes(composition, nodes, requests, now, settings.composition_deadline_s, lag,
                         f"{where}: data.{COMPOSABLE_KEY}")


def _carrying(timed: Stage, sorts: Stage, keys: set, snap: Snapshot) -> dict[str, list[PodRef]]:
    """The pods of `keys` (marked preempted; asked to save or awaited at a checkpoint) by job: the
    job (planned, or a broken gang) whose pods it is one of, else the pod's own name."""
    out: dict[str, list[PodRef]] = {}
    for key in sorted(keys):
        p = timed.made[key].passed
        name = f"{p.namespace}/{sorts.made[key].passed.view.group}"  # its job's, if it has one
        refs = snap.broken.get(name, snap.pods.get(name, ()))
        job = name if any(ref.uid == p.uid for ref in refs) else p.full_name
        out.setdefault(job, []).append(p.ref)
    return out
