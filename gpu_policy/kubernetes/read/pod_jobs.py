"""GPU pods -> jobs: what becomes of each GPU pod (`sort_pod`), and what the pods of one job
become (`make_group`). Rules where the contract (docs/kubernetes.md) is silent:

- GPUs held by pods gpu-policy may not touch (no queue, or a department's: *unmanaged*; being
  deleted: *terminating*) are counted, never planned (gpu_policy.kubernetes.read.snapshot gives
  them snapshot-only queues).
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
"""

from __future__ import annotations

from typing import NamedTuple

from gpu_policy.kubernetes.read.devices import Devices, physical_request
from gpu_policy.kubernetes.read.kept import Made
from gpu_policy.kubernetes.read.kept_jobs import LEFT_OUT, MANAGED, TERMINATING, UNMANAGED, GroupMade, Sorted
from gpu_policy.kubernetes.read.pods import PodRef, PodView
from gpu_policy.kubernetes.read.progress import Moments, progress
from gpu_policy.kubernetes.read.topology import words
from gpu_policy.kubernetes.read.workloads import gang_trouble, with_pod_group
from gpu_policy.model import Job


class SortContext(NamedTuple):
    """What sorting a pod reads beside the pod: its nodes' devices, the PodGroups' sizes, the
    names of the nodes, each namespace's queue (its label), the queues and the leaf queues."""

    devices: Devices
    pod_groups: dict[tuple[str, str, str], int]
    nodes: frozenset[str]
    namespace_queues: dict[str, str]
    known: set[str]
    leaf: set[str]


def sort_pod(pod: PodView, ctx: SortContext) -> Made:
    """The pod as a holder of physical GPUs and a member of its PodGroup, and what becomes of it:
    a job's pod (MANAGED), unmanaged, terminating, left out (bound to a node that does not
    exist), or (kind None) a pod that asks for no GPU."""
    pod = with_pod_group(physical_request(pod, ctx.devices), ctx.pod_groups)
    if not pod.asks_for_gpus:
        return Made(Sorted(pod, None))
    if pod.node and pod.node not in ctx.nodes:
        return Made(Sorted(pod, LEFT_OUT),
                    lines=(f"pod {pod.full_name} is bound to node {pod.node}, which does not exist: left out",))
    if pod.deleting:
        return Made(Sorted(pod, TERMINATING))
    queue = queue_of(pod, ctx.namespace_queues, ctx.known)
    if pod.unreadable:
        return Made(Sorted(pod, UNMANAGED), lines=(f"pod {pod.full_name} {pod.unreadable}: counted as unmanaged",))
    if queue not in ctx.leaf:
        why = ("no queue (label gpu-policy.io/queue or kai.scheduler/queue, on the pod or its namespace)"
               if queue is None else f"queue {queue!r}, which is a department" if queue in ctx.known
               else f"queue {queue!r}, which does not exist")
        return Made(Sorted(pod, UNMANAGED, why))
    return Made(Sorted(pod, MANAGED))


def queue_of(pod: PodView, namespace_queues: dict[str, str], known: set[str]) -> str | None:
    if pod.queue_label:
        return pod.queue_label
    if pod.namespace in namespace_queues:
        return namespace_queues[pod.namespace]
    return pod.namespace if pod.namespace in known else None


def make_group(name: str, pods: tuple[PodView, ...], reserved: bool, namespace_queues: dict[str, str],
               known: set[str], now: float) -> GroupMade:
    """What the pods of one job become: held by its reservation (`reserved`), a gang in trouble
    (broken: its pods holding GPUs are terminating; incomplete: not planned yet), or a job to
    plan (pods that cannot be one job are unmanaged). Its pods waiting at gpu-policy's gate are
    `gated`, in the order of their names."""
    waiting = [p for p in pods if p.gated]
    waiting.sort(key=lambda p: p.name)
    gated = [p.ref for p in waiting] or None
    if reserved:  # the reservation stands for the job until all its pods hold GPUs
        held = [p.node for p in pods if p.node]
        part_way = (f"job {name}: released part way: {len(held)} of its pods released, {len(waiting)} still gated; "
                    "its reservation holds their GPUs until they are released")
        return GroupMade(name, gated=gated, held=held, lines=(part_way,) if held and waiting else ())
    trouble = gang_trouble(pods)
    if trouble is not None:
        verdict, why = trouble
        then = "its pods are evicted so that it restarts whole" if verdict == "broken" else "not planned yet"
        line = (f"job {name}: {verdict}: {why}; {then}",)
        if verdict == "broken":
            holding = tuple(p for p in pods if p.node)
            return GroupMade(name, gated=gated, broken=[p.ref for p in holding], terminating=holding, lines=line)
        return GroupMade(name, gated=gated, incomplete=why, lines=line)
    said: list[str] = []
    job, refs, moments = _job(name, pods, namespace_queues, known, now, said)
    if job is None:
        return GroupMade(name, gated=gated, unmanaged=pods, lines=tuple(said))
    return GroupMade(name, job=job, refs=refs, moments=moments, gated=gated, lines=tuple(said))


def _job(name: str, pods: tuple[PodView, ...], namespace_queues: dict[str, str], known: set[str], now: float,
         warnings: list[str]) -> tuple[Job | None, list[PodRef] | None, Moments | None]:
    """One job from the pods of a gang as seen at `now`, its pods as the actuator names them, and
    when its planned pods started, were created and checkpointed (a later look that keeps the job
    counts its ages from them); None (with a warning) when the pods disagree."""
    first = pods[0]
    queue = queue_of(first, namespace_queues, known)
    if not _agree(name, pods, queue, namespace_queues, known, warnings):
        return None, None, None
    bound = [p for p in pods if p.node]
    if bound and len(bound) < len(pods):
        warnings.append(f"job {name}: {len(bound)} of {len(pods)} pods are bound; planned as the bound part")
        planned = bound
    else:
        planned = pods
    moments = Moments.of(planned)
    preemptible = [p.preemptible for p in planned if p.preemptible is not None]
    job = Job(
        name=name, queue=queue, gpus=first.gpus, replicas=len(planned),
        priority=max(p.priority for p in planned), preemptible=min(preemptible) if preemptible else None,
        gpu_model=first.gpu_model, mig_profile=first.mig_profile, cpu=_most(p.cpu for p in planned),
        memory_gib=_most(p.memory_gib for p in planned), **_where_running(planned, bool(bound)),
        submitted_at=rounded(moments.created), **progress(planned, moments, now, bool(bound)),
        **first.constraints, topology=first.topology,
    )
    refs = [p.ref for p in pods if p.node or not job.running]
    return job, refs, moments


def _where_running(pods: list[PodView], bound: bool) -> dict:
    """The job's `running` nodes and `gpu_indices` (those only when every pod has them)."""
    if not bound:
        return {"running": [], "gpu_indices": None}
    indices = [p.gpu_indices for p in pods] if all(p.gpu_indices for p in pods) else None
    return {"running": [p.node for p in pods], "gpu_indices": indices}


def _agree(name: str, pods: tuple[PodView, ...], queue: str, namespace_queues: dict[str, str], known: set[str],
           warnings: list[str]) -> bool:
    """Whether the pods of one job ask for the same GPUs in the same queue (`queue`, the first
    pod's) and the same topology levels; a warning names the first that does not."""
    first = pods[0]
    for p in pods[1:]:
        for what, mine, theirs in (("GPUs", p.gpus, first.gpus), ("queue", queue_of(p, namespace_queues, known), queue),
                                   ("topology", words(p.topology), words(first.topology))):
            if mine != theirs:
                warnings.append(f"job {name}: pod {p.full_name} asks for {what} {mine}, pod {first.full_name} for "
                                f"{theirs}: the pods of one job must agree; counted as unmanaged")
                return False
    return True


def _most(values) -> float | None:
    """The largest of the values that are known (a replica's request in a gang)."""
    known = [v for v in values if v is not None]
    return rounded(max(known)) if known else None


def rounded(value: float | None) -> float | None:
    """To the thousandth, a whole number as an int: what a snapshot file holds is what was planned."""
    if value is None:
        return None
    rounded_value = round(value, 3)
    return int(rounded_value) if float(rounded_value).is_integer() else rounded_value
