"""What one GPU holds: fractions share a GPU while their sizes sum to at most one. The one
place this is checked (placing running replicas, the program's bounds, realising a plan,
the greedy scope and the reasons all ask here). Its reasons: a job that no node could ever
run (`never_fits`), and one the GPUs a plan leaves free cannot hold (`no_room`)."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

from gpu_policy import placement
from gpu_policy.model import Job, Node
from gpu_policy.planner import shapes  # the module, not its names: shapes imports the rules
from gpu_policy.planner.codes import Reason, gpu_count
from gpu_policy.planner.rules.vocabulary import EPS

if TYPE_CHECKING:
    from gpu_policy.planner.reasons import FreeRoom, Judged
    from gpu_policy.planner.shapes import NodeKind
    from gpu_policy.planner.telemetry import GpuLimits

#: What a replica asks besides GPUs, in a reason's words.
_RESOURCES = (("cpu", "CPUs"), ("memory_gib", "GiB of memory"))


def why_never(job: Job, judged: Judged) -> Reason | None:
    """No node of the cluster could ever run one replica: the job waits until the cluster changes."""
    never = never_fits(job, judged.kinds, judged.s.nodes)
    return Reason(never.code, f"can never fit: {never.text}") if never else None


def why_wait(job: Job, judged: Judged) -> Reason | None:
    """Fewer MIG slices of the job's profile are free after the plan than its replicas need."""
    free = judged.free_mig_slices(job.mig_profile) if job.mig_profile else None
    if free is None or free >= job.replicas:
        return None
    return Reason("NoFreeMigSlice", f"needs {job.replicas} MIG slice{'s' if job.replicas > 1 else ''} of "
                                    f"{job.mig_profile}; {free} free after this plan")


def never_fits(job: Job, kinds: Counter[NodeKind], cluster: list[Node]) -> Reason | None:
    """Why no node of the cluster (`shapes.node_kinds` of its nodes, `cluster`) could ever
    run one replica, or None."""
    shape = shapes.shape_of(job)
    admitted = {k: c for k, c in kinds.items() if shape.admitted(k)}
    if not admitted:
        return Reason("NoNodeMatches", placement.unmet(job, cluster))
    everywhere = len(admitted) == len(kinds)
    nodes = {k: c for k, c in admitted.items() if job.fits_model(k)}
    return _no_model(job, everywhere) if not nodes else _too_big(job, nodes, everywhere)


def _no_model(job: Job, everywhere: bool) -> Reason:
    """No node the job may use has its GPU model (or its MIG slices)."""
    where = "no node" if everywhere else "no node its placement constraints allow"
    code = "NoNodeFits" if everywhere else "NoNodeMatches"
    if job.mig_profile:
        model = f" of GPU model {' or '.join(job.gpu_model)}" if job.gpu_model else ""
        return Reason(code, f"{where}{model} has {job.mig_profile} MIG slices")
    return Reason(code, f"{where} has GPU model {' or '.join(job.gpu_model or [])}")


def _too_big(job: Job, nodes: Counter[NodeKind], everywhere: bool) -> Reason | None:
    """One replica, or the whole gang, is larger than the nodes it may use (`nodes`: their
    kinds, `everywhere`: all of the cluster's)."""
    need = 1 if job.is_fractional else job.gpus
    biggest = max(k.healthy for k in nodes)
    if biggest < need:
        return Reason("NoNodeFits", f"needs {gpu_count(need)} on one node; the largest node has {biggest} healthy")
    if not job.is_fractional and sum(c * (k.healthy // int(need)) for k, c in nodes.items()) < job.replicas:
        what = "the whole cluster holds" if everywhere else "the nodes it may use hold"
        return Reason("NoNodeFits", f"a gang of {job.replicas} replicas x {gpu_count(need)} is more than {what}")
    for resource, unit in _RESOURCES:
        want = getattr(job, resource)
        sizes = [getattr(k, resource) for k in nodes if getattr(k, resource) is not None]
        if want and sizes and len(sizes) == len(nodes) and max(sizes) < want:
            return Reason("NoNodeFits", f"needs {want:g} {unit} per replica; the largest node has {max(sizes):g}")
    return None


def no_room(job: Job, room: FreeRoom, limits: GpuLimits) -> Reason | None:
    """Why the GPUs, CPUs and memory a plan leaves free (`room`: on the nodes the job may
    use) cannot hold the job, or None if they could."""
    lacks = _no_share(job, room, limits) if job.is_fractional else _no_block(job, room)
    return lacks or _no_cpu_or_memory(job, room)


def _no_share(job: Job, room: FreeRoom, limits: GpuLimits) -> Reason | None:
    """No GPU has room for the fraction, or every one with room is busy (telemetry)."""
    models = room.models(job)
    shareable = [x for m in models for x in room.shares[m] if fits_on_gpu(1 - x[0], job.gpus)]
    if not shareable:
        most = max((x[0] for m in models for x in room.shares[m]), default=0)
        return Reason("NoGpuShareFits", f"needs {job.gpus:g} of a GPU; the most room on any GPU is {most:g}")
    if not any(free for *_, free in shareable) and not any(
            limits.room_for_fraction(n, i, job.gpus) for _, n, i, _ in shareable):
        return Reason("SharedGpusBusy", f"needs {job.gpus:g} of a GPU; every GPU with room is busy (above the "
                                        "utilisation limit for sharing) or lacks the framebuffer memory")
    return None


def _no_block(job: Job, room: FreeRoom) -> Reason | None:
    """No node has a free block for one replica, or the free blocks hold only part of the gang."""
    block = room.largest_block(job)
    if block < job.gpus:
        gang = f" for each of {job.replicas} replicas" if job.replicas > 1 else ""
        code = "FragmentedNoBlock" if room.free_gpus(job) >= job.gpus else "NotEnoughFreeGpus"
        return Reason(code, f"needs {gpu_count(job.gpus)} on one node{gang}; the largest free block{room.where} "
                            f"is {block}")
    fits = room.replicas_that_fit(job)
    if fits < job.replicas:
        return Reason("GangDoesNotFit", f"a gang of {job.replicas} replicas x {gpu_count(job.gpus)}; "
                                        f"the free GPUs hold only {fits} such replicas now")
    return None


def _no_cpu_or_memory(job: Job, room: FreeRoom) -> Reason | None:
    """No node has the CPUs or memory one replica asks, where every node declares them."""
    for resource, unit in _RESOURCES:
        want = getattr(job, resource) or 0
        most = room.most_spare[resource]
        if want and room.all_declare[resource] and most is not None and most < want:
            return Reason("NotEnoughCpuOrMemory",
                          f"needs {want:g} {unit} per replica; the most free on any node is {most:g}")
    return None


def fits_on_gpu(used: float, gpus: float) -> bool:
    """Whether a fraction of `gpus` fits beside the `used` part of one GPU."""
    return used + gpus <= 1 + EPS


def has_room(used: float) -> bool:
    """Whether a GPU holding the `used` part has any room left for a fraction."""
    return used < 1 - EPS


def per_gpu(gpus: float) -> int:
    """How many fractions of `gpus` one GPU holds."""
    return math.floor(1 / gpus + EPS)
