"""Why a job waits, starts, was preempted or moved, in words a person understands, with the
rule that decided it (the same functions of `gpu_policy.planner.rules` the program
uses) and the true numbers: GPUs held before and after the plan, shares, tiers. Each
builder returns a `Reason`: the sentence and its stable code (`gpu_policy.planner.codes`)
come from the same branch, so they never disagree."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from gpu_policy import placement
from gpu_policy.model import TERMINATING_QUEUE, Job, Node, Scenario
from gpu_policy.plan import Placement
from gpu_policy.planner import mig, rules
from gpu_policy.planner.codes import Reason
from gpu_policy.planner.layout import Layout
from gpu_policy.planner.shapes import Eligible, NodeKind, shape_of
from gpu_policy.planner.telemetry import GpuLimits

class Composition(Protocol):
    """What a wait reason asks of the composable nodes (`attach.Composer` answers; reasons
    does not import it: attach builds its starts' reasons here)."""

    def wait_clause(self, job: Job, spare: dict[str, dict[str, float]], layout: Layout) -> str | None: ...


def _gpus(n: float) -> str:
    return f"{n:g} GPU" + ("" if n == 1 else "s")


@dataclass
class Judged:
    """The state a reason is judged on: the cluster and the queues after the plan."""

    s: Scenario
    tree: rules.QueueTree
    shares: rules.Shares
    before: dict[str, float]
    after: dict[str, float]
    nonpreemptible_after: dict[str, float]
    layout: Layout
    spare: dict[str, dict[str, float]]
    limits: GpuLimits
    kinds: Counter[NodeKind]
    receiving: dict[str, str] = field(default_factory=dict)   # queue -> tier it received GPUs in
    giving: dict[str, str] = field(default_factory=dict)      # queue -> tier it gave GPUs in
    swapped: dict[str, list[Job]] = field(default_factory=dict)  # queue -> its jobs the plan preempts
    cut_off: bool = False                                     # the solver ran out of time
    composition: Composition | None = None                    # composable nodes (None: there are none)
    refused: dict[str, str] = field(default_factory=dict)     # job -> why its queue does not admit it
    _rooms: dict = field(default_factory=dict)                # eligible node names -> their FreeRoom

    @cached_property
    def room(self) -> FreeRoom:
        return FreeRoom(self.layout, self.spare)

    @cached_property
    def _eligible(self) -> Eligible:
        return Eligible(self.s.nodes)

    def room_for(self, job: Job) -> FreeRoom:
        """The free room on the nodes the job's placement constraints allow (one per constraints)."""
        names = self._eligible.names(placement.constraints_of(job))
        if names is None:
            return self.room
        if names not in self._rooms:
            self._rooms[names] = FreeRoom(self.layout, self.spare, names)
        return self._rooms[names]


def _entity(tree: rules.QueueTree, name: str, queue: str) -> str:
    return name if name == queue else f"{name} (department of {queue})"


def never_fits(job: Job, kinds: Counter[NodeKind], cluster: list[Node]) -> Reason | None:
    """Why no node of the cluster (`shapes.node_kinds` of its nodes, `cluster`) could ever
    run one replica, or None."""
    shape = shape_of(job)
    admitted = {k: c for k, c in kinds.items() if shape.admitted(k)}
    if not admitted:
        return Reason("NoNodeMatches", placement.unmet(job, cluster))
    nodes = {k: c for k, c in admitted.items() if job.fits_model(k)}
    if not nodes and job.mig_profile:
        where = "no node" if len(admitted) == len(kinds) else "no node its placement constraints allow"
        code = "NoNodeFits" if len(admitted) == len(kinds) else "NoNodeMatches"
        model = f" of GPU model {' or '.join(job.gpu_model)}" if job.gpu_model else ""
        return Reason(code, f"{where}{model} has {job.mig_profile} MIG slices")
    if not nodes:
        where = "no node" if len(admitted) == len(kinds) else "no node its placement constraints allow"
        code = "NoNodeFits" if len(admitted) == len(kinds) else "NoNodeMatches"
        return Reason(code, f"{where} has GPU model {' or '.join(job.gpu_model or [])}")
    need = 1 if job.is_fractional else job.gpus
    biggest = max(k.healthy for k in nodes)
    if biggest < need:
        return Reason("NoNodeFits", f"needs {_gpus(need)} on one node; the largest node has {biggest} healthy")
    if not job.is_fractional and sum(c * (k.healthy // int(need)) for k, c in nodes.items()) < job.replicas:
        what = "the whole cluster holds" if len(admitted) == len(kinds) else "the nodes it may use hold"
        return Reason("NoNodeFits", f"a gang of {job.replicas} replicas x {_gpus(need)} is more than {what}")
    for resource, unit in (("cpu", "CPUs"), ("memory_gib", "GiB of memory")):
        want = getattr(job, resource)
        sizes = [getattr(k, resource) for k in nodes if getattr(k, resource) is not None]
        if want and sizes and len(sizes) == len(nodes) and max(sizes) < want:
            return Reason("NoNodeFits", f"needs {want:g} {unit} per replica; the largest node has {max(sizes):g}")
    return None


def wait_reason(job: Job, j: Judged, unplaced: bool = False) -> Reason:
    """Why `job` waits, judged on the cluster and the queues as the plan leaves them."""
    q = job.queue
    if job.name in j.refused:
        return Reason("NotAllowedInQueue", j.refused[job.name])
    permanent = never_fits(job, j.kinds, j.s.nodes)
    if permanent:
        return Reason(permanent.code, f"can never fit: {permanent.text}")
    if unplaced:
        return Reason("NotPlacedYet", "the plan chose it, but placing it found no node with room; "
                                      "it starts in a later plan")
    blocker = rules.limit_blocker(j.tree, j.shares, j.after, q, job.total_gpus)
    if blocker:
        return Reason("QueueAboveLimit", f"{_entity(j.tree, blocker, q)} is at its limit: holds "
                                         f"{j.after[blocker]:g} of {_gpus(j.shares.limit[blocker])}")
    if not job.is_preemptible:
        blocker = rules.nonpreemptible_blocker(j.tree, j.shares, j.nonpreemptible_after, q, job.total_gpus)
        if blocker:
            return Reason("NonPreemptibleAboveDeserved",
                          f"non-preemptible jobs start only within deserved: {_entity(j.tree, blocker, q)}'s would "
                          f"hold {j.nonpreemptible_after[blocker] + job.total_gpus:g} of its "
                          f"{j.shares.deserved[blocker]:g} deserved GPUs")
    free = mig.free_slices(j.s, j.layout, job.mig_profile) if job.mig_profile else None
    if free is not None and free < job.replicas:
        return Reason("NoFreeMigSlice", f"needs {job.replicas} MIG slice{'s' if job.replicas > 1 else ''} of "
                                        f"{job.mig_profile}; {free} free after this plan")
    room = _room(job, j)
    if room is None:  # it would fit on the GPUs the plan leaves free
        if j.cut_off:
            return Reason("PlanCutShort", "the plan's time limit ran out before it could be placed; "
                                          "it starts in a later plan")
        swapped = [v for v in j.swapped.get(q, []) if rules.may_swap_back(v, job)]
        if swapped:
            v = swapped[0]
            return Reason("WouldSwapInsideQueue",
                          f"{q} loses {v.name} (priority {v.priority}) in this plan; inside a queue only a higher "
                          f"priority takes a job's place, and {v.name} could take this one's")
        if j.receiving.get(q) == rules.GUARANTEE:
            cap = rules.cap(j.shares, q, rules.GUARANTEE)
            return Reason("ClaimsWithinDeserved",
                          f"{q} takes GPUs from other queues in this plan (guarantee tier), so its claims end "
                          f"within its deserved quota of {cap:g}: it holds {j.after[q]:g} GPUs after this plan")
        beyond = _beyond_share(job, j)
        return (Reason("ClaimsBeforeBorrowing", beyond) if beyond else
                Reason("NoRuleApplies", "free GPUs would fit it, but starting it breaks no rule the plan knows"))
    clause = j.composition.wait_clause(job, j.spare, j.layout) if j.composition else None
    text = f"{room.text}; {clause}" if clause else room.text
    beyond = _beyond_share(job, j)
    if beyond:
        return Reason(room.code, f"{text}; {beyond}")
    if j.cut_off:  # reclaim may be possible: the solver stopped before deciding it
        return Reason("PlanCutShort", f"{text}; the plan's time limit ran out before reclaiming GPUs for it was decided")
    return Reason(room.code, f"{text}; {_shutting_down(j) or _no_reclaim(job, j)}")


def _tier_share(tier: str) -> str:
    return "fair share" if tier == rules.FAIR else "deserved quota"


def _beyond_share(job: Job, j: Judged) -> str | None:
    """The claims-before-borrowing reason: starting it would take its queue above its share."""
    q = job.queue
    after = j.after[q] + job.total_gpus
    if after <= j.shares.fair[q] + rules.EPS:
        return None
    return (f"{q} holds {j.after[q]:g} GPUs after this plan; with it {after:g}, above its fair share of "
            f"{j.shares.fair[q]}, so it may use only free GPUs that no queue within its share could use")


def _shutting_down(j: Judged) -> str | None:
    """The pods whose GPUs come back when they exit (evicted or deleted, still shutting down), named."""
    leaving = [job for job in j.s.jobs if job.queue == TERMINATING_QUEUE and job.is_running]
    if not leaving:
        return None
    names = ", ".join(job.name for job in leaving[:3]) + (f" and {len(leaving) - 3} more" if len(leaving) > 3 else "")
    return (f"{_gpus(sum(job.total_gpus for job in leaving))} are still held by pods shutting down ({names}); "
            f"they are free when those pods exit")


def _no_reclaim(job: Job, j: Judged) -> str:
    q = job.queue
    return (f"{q} would hold {j.after[q] + job.total_gpus:g} GPUs with it, within its fair share of "
            f"{j.shares.fair[q]}, but no queue it may reclaim from holds GPUs above its floor where it would "
            f"fit (each victim must be needed above its queue's fair share, or deserved quota)")


class FreeRoom:
    """The free GPUs the plan leaves, summed up once per GPU model for every reason: how many
    nodes have each number of free GPUs, and each GPU's room for fractions."""

    def __init__(self, layout: Layout, spare: dict[str, dict[str, float]], only: frozenset[str] | None = None):
        """`only`: the nodes to look at (None: all)."""
        self.blocks: dict[str | None, Counter] = defaultdict(Counter)   # model -> free GPUs -> nodes
        self.shares: dict[str | None, list[tuple]] = defaultdict(list)  # model -> (room, node, GPU, free)
        self.where = "" if only is None else " of the nodes it may use"
        if only is not None:
            spare = {n: free for n, free in spare.items() if n in only}
        for nl in layout.nodes.values():
            if only is not None and nl.node.name not in only:
                continue
            self.blocks[nl.node.gpu_model][len(nl.free_indices())] += 1
            for i, sl in enumerate(nl.slots):
                if nl.healthy(i) and not sl.whole and rules.has_room(sl.used):
                    self.shares[nl.node.gpu_model].append((1 - sl.used, nl.node.name, i, sl.free))
        self.most_spare = {r: max((free[r] for free in spare.values() if r in free), default=None)
                           for r in ("cpu", "memory_gib")}
        self.all_declare = {r: all(r in free for free in spare.values()) for r in ("cpu", "memory_gib")}

    def models(self, job: Job) -> list[str | None]:
        return [m for m in self.blocks if not job.gpu_model or m in job.gpu_model]

    def largest_block(self, job: Job) -> int:
        return max((f for m in self.models(job) for f, n in self.blocks[m].items() if n), default=0)

    def replicas_that_fit(self, job: Job) -> int:
        return sum(n * (f // int(job.gpus)) for m in self.models(job) for f, n in self.blocks[m].items())

    def free_gpus(self, job: Job) -> int:
        """Whole free GPUs of the models the job accepts, on all nodes together."""
        return sum(n * f for m in self.models(job) for f, n in self.blocks[m].items())


def _room(job: Job, j: Judged) -> Reason | None:
    """Why the GPUs the plan leaves free cannot hold the job, or None if they could."""
    room = j.room_for(job)
    if job.is_fractional:
        models = room.models(job)
        shareable = [x for m in models for x in room.shares[m] if rules.fits_on_gpu(1 - x[0], job.gpus)]
        most = max((x[0] for m in models for x in room.shares[m]), default=0)
        if not shareable:
            return Reason("NoGpuShareFits", f"needs {job.gpus:g} of a GPU; the most room on any GPU is {most:g}")
        if not any(free for *_, free in shareable) and not any(
                j.limits.room_for_fraction(n, i, job.gpus) for _, n, i, _ in shareable):
            return Reason("SharedGpusBusy", f"needs {job.gpus:g} of a GPU; every GPU with room is busy (above the "
                                            "utilisation limit for sharing) or lacks the framebuffer memory")
    else:
        block = room.largest_block(job)
        if block < job.gpus:
            gang = f" for each of {job.replicas} replicas" if job.replicas > 1 else ""
            code = "FragmentedNoBlock" if room.free_gpus(job) >= job.gpus else "NotEnoughFreeGpus"
            return Reason(code, f"needs {_gpus(job.gpus)} on one node{gang}; the largest free block{room.where} is {block}")
        fits = room.replicas_that_fit(job)
        if fits < job.replicas:
            return Reason("GangDoesNotFit", f"a gang of {job.replicas} replicas x {_gpus(job.gpus)}; "
                                            f"the free GPUs hold only {fits} such replicas now")
    for resource, unit in (("cpu", "CPUs"), ("memory_gib", "GiB of memory")):
        want = getattr(job, resource) or 0
        most = room.most_spare[resource]
        if want and room.all_declare[resource] and most is not None and most < want:
            return Reason("NotEnoughCpuOrMemory",
                          f"needs {want:g} {unit} per replica; the most free on any node is {most:g}")
    return None


def start_reason() -> Reason:
    """A start on GPUs that are there (a start on GPUs being attached: `composition_start`)."""
    return Reason("Admitted", "")


def composition_start(when: str, action: str, reason: str) -> Reason:
    """A start or move onto GPUs the plan attaches: it happens `when` they are attached."""
    if action == "start":
        return Reason("WaitingForComposition", f"starts {when}")
    return Reason("MovedToDefragment", f"{reason}; {when}")


def preempt_reason(job: Job, j: Judged, started: dict[str, list[Job]], idle_s: float | None = None) -> Reason:
    """Why a running job is preempted; `started`: the jobs the plan starts, per queue (so that
    each reason reads only its own queue's starts)."""
    why = _preempt_why(job, j, started)
    return Reason(why.code, f"{why.text}; idle for {idle_s / 60:.0f} min") if idle_s is not None else why


def _preempt_why(job: Job, j: Judged, started: dict[str, list[Job]]) -> Reason:
    q = job.queue
    mine = [p for p in started.get(q, ()) if rules.may_preempt_inside(job, p)]
    tier = j.giving.get(q)
    if tier:
        takers = sorted(r for r in started if r in j.receiving and r != q)
        parts = []
        for r in takers:
            up_r, up_g = j.tree.judged(r, q)
            receiver, giver = up_r[-1], up_g[-1]
            cap, share = rules.cap(j.shares, receiver, tier), _tier_share(tier)
            parts.append(f"{receiver} ends at {j.after[receiver]:g}, within its {share} of {cap:g}"
                         if j.after[receiver] <= cap + rules.EPS else
                         f"{receiver} ends at {j.after[receiver]:g}: its claims within its {share} of {cap:g}, "
                         "the rest borrowed on GPUs no claim could use")
        giver = q
        return Reason("ReclaimedGuarantee" if tier == rules.GUARANTEE else "ReclaimedFairShare",
                      f"reclaimed for {', '.join(takers) or 'other queues'} ({tier} tier): "
                      f"{'; '.join(parts) + '; ' if parts else ''}{giver} held {j.before[giver]:g} GPUs, above its "
                      f"{_tier_share(tier)} of {rules.floor(j.shares, giver, tier):g}, and keeps {j.after[giver]:g}")
    if mine:
        names = ", ".join(f"{p.name} (priority {p.priority})" for p in mine)
        return Reason("PreemptedInsideQueue", f"preempted inside {q} (priority {job.priority}) for "
                                              f"higher-priority {names}")
    return Reason("Preempted", f"preempted: {q} held {j.before[q]:g} GPUs and keeps {j.after[q]:g}")


def move_reason(job: Job, to: list[Placement], started: dict[str, list[Placement]]) -> Reason:
    """Why a running job restarts elsewhere: the jobs its old GPUs let start."""
    sources = sorted(set(job.running))
    names = sorted(name for name, replicas in started.items() if any(p.node in sources for p in replicas))
    gain = f"so that {', '.join(names)} fit{'s' if len(names) == 1 else ''} there" if names else "to make room"
    where = ", ".join(sorted({p.node for p in to}))
    return Reason("MovedToDefragment", f"moved from {', '.join(sources)} to {where} {gain}; restarts from its checkpoint")
