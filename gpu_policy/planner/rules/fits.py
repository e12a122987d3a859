"""What fits where: a job no node of the cluster could ever run (`never_fits`), one the GPUs,
CPUs and memory a plan leaves free cannot hold (`no_room`), MIG slices left; its rows are the
capacity rows (`gpu_policy.planner.rules.capacity`): every started and moved replica placed
within what each GPU, node and pool has."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from gpu_policy.model import Job, Node, placement
from gpu_policy.model.layout import fits_on_gpu
from gpu_policy.planner.core.codes import Reason, gpu_count
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.judged import FreeRoom, Judged
from gpu_policy.planner.core.rule import Rule
from gpu_policy.planner.core.shapes import NodeKind, Shape, shape_of
from gpu_policy.planner.core.telemetry import GpuLimits
from gpu_policy.planner.rules.capacity import build_capacity

#: What a replica asks besides GPUs, in a reason's words.
_RESOURCES = (("cpu", "CPUs"), ("memory_gib", "GiB of memory"))


def never_fits(job: Job, kinds: Counter[NodeKind], cluster: list[Node]) -> Reason | None:
    """Why no node of the cluster (`shapes.node_kinds` of its nodes, `cluster`) could ever
    run one replica, or None."""
    shape = shape_of(job)
    admitted = {k: c for k, c in kinds.items() if shape.admitted(k)}
    if not admitted:
        return Reason("NoNodeMatches", placement.unmet(job, cluster))
    everywhere = len(admitted) == len(kinds)
    nodes = {k: c for k, c in admitted.items() if job.fits_model(k)}
    return _no_model(job, everywhere) if not nodes else _too_big(job, nodes, everywhere)


def could_ever_fit(kinds: Counter[NodeKind], cluster: list[Node]) -> Callable[[Job], bool]:
    """A test of whether some node of the cluster could ever run one replica of a job
    (`never_fits` finds no reason), asked once per shape and gang size: all `never_fits`
    reads of a job to find whether there is a reason (a plan asks for every waiting job)."""
    known: dict[tuple[Shape, int], bool] = {}

    def could(job: Job) -> bool:
        key = (shape_of(job), job.replicas)
        if key not in known:
            known[key] = never_fits(job, kinds, cluster) is None
        return known[key]
    return could


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


class Fits(Rule):
    """What fits where: the capacity rows, and the reasons a job can never run or the free
    room cannot hold it."""

    name = "fits"
    codes = {
        "NoNodeFits": "no node of the cluster could ever hold one replica (GPU model, GPUs, CPUs or memory)",
        "NoNodeMatches": "no node meets the job's placement constraints (node selector, affinity, taints)",
        "FragmentedNoBlock": "enough GPUs are free in all, but no node has a free block as large as one replica",
        "NotEnoughFreeGpus": "fewer GPUs are free than one replica needs",
        "GangDoesNotFit": "the free GPUs hold some replicas of the gang, not all",
        "NoFreeMigSlice": "fewer MIG slices of its profile are free than its replicas need",
        "NoGpuShareFits": "no GPU has room for the fraction it asks",
        "SharedGpusBusy": "GPUs with room for the fraction are busy or lack the memory it needs",
        "NotEnoughCpuOrMemory": "no node has the CPUs or memory one replica asks",
    }

    def rows(self, ctx: PlanContext) -> None:
        build_capacity(ctx.m, ctx.scenario, ctx.layout, ctx.scope, ctx.limits)

    def why_never(self, job: Job, judged: Judged) -> Reason | None:
        """No node of the cluster could ever run one replica: the job waits until the cluster changes."""
        never = never_fits(job, judged.kinds, judged.s.nodes)
        return Reason(never.code, f"can never fit: {never.text}") if never else None

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """Fewer MIG slices of the job's profile are free after the plan than its replicas
        need; or the free GPUs would hold the job, but the solver stopped before it could
        place it."""
        free = judged.free_mig_slices(job.mig_profile) if job.mig_profile else None
        if free is not None and free < job.replicas:
            return self.reason("NoFreeMigSlice", f"needs {job.replicas} MIG slice{'s' if job.replicas > 1 else ''} "
                                                 f"of {job.mig_profile}; {free} free after this plan")
        if judged.cut_off and judged.no_room(job) is None:
            return Reason("PlanCutShort", "the plan's time limit ran out before it could be placed; it starts in a "
                                          "later plan")
        return None
