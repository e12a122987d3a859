"""Why a job waits, starts, was preempted or moved, in words a person understands, with the
rule that decided it and the true numbers: GPUs held before and after the plan, shares,
tiers. Each rule module of `gpu_policy.planner.rules` writes its own reasons (`why_wait`,
`why_preempt`: the sentence and its stable code, `gpu_policy.planner.codes`, from the same
branch, so they never disagree); here the rules are asked in order, on the state the plan
leaves (`Judged`), and the first answer is the reason."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, Protocol

from gpu_policy.model import placement
from gpu_policy.model import TERMINATING_QUEUE, Job, Scenario
from gpu_policy.model.plan import Placement
from gpu_policy.planner import mig
from gpu_policy.planner.codes import Reason
from gpu_policy.model.layout import Layout, NodeLayout, has_room
from gpu_policy.planner.rules import QueueTree, Shares, claims, fits, inside, limits, reclaim, victims
from gpu_policy.planner.shapes import Eligible, NodeKind
from gpu_policy.planner.telemetry import GpuLimits


class Composition(Protocol):
    """What a wait reason asks of the composable nodes (`rules.composition.Composer` answers;
    reasons does not import it: `rules.composition` imports `composition_start` from here)."""

    def wait_clause(self, job: Job, spare: dict[str, dict[str, float]], layout: Layout) -> str | None: ...


@dataclass
class Judged:
    """The state a reason is judged on: the cluster and the queues after the plan."""

    s: Scenario
    tree: QueueTree
    shares: Shares
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
    unplaced: set[str] = field(default_factory=set)           # chosen to start, but placing found no room
    _rooms: dict = field(default_factory=dict)                # eligible node names -> their FreeRoom
    _no_room: dict = field(default_factory=dict)              # job name -> why the free room cannot hold it
    _shared: dict = field(default_factory=dict)               # key -> a reason many jobs share (`shared`)

    @cached_property
    def node_rooms(self) -> list[NodeRoom]:
        """Each node's free room after the plan, read once for every reason and the summary."""
        return [free_room_of(nl) for nl in self.layout.nodes.values()]

    @cached_property
    def room(self) -> FreeRoom:
        return FreeRoom(self.node_rooms, self.spare)

    @cached_property
    def _eligible(self) -> Eligible:
        return Eligible(self.s.nodes)

    def room_for(self, job: Job) -> FreeRoom:
        """The free room on the nodes the job's placement constraints allow (one per constraints)."""
        names = self._eligible.names(placement.constraints_of(job))
        if names is None:
            return self.room
        if names not in self._rooms:
            self._rooms[names] = FreeRoom(self.node_rooms, self.spare, names)
        return self._rooms[names]

    def no_room(self, job: Job) -> Reason | None:
        """Why the GPUs the plan leaves free cannot hold the job (`fits.no_room`, with why
        attaching GPUs does not help), or None if they could; once per job."""
        if job.name not in self._no_room:
            room = fits.no_room(job, self.room_for(job), self.limits)
            clause = self.composition.wait_clause(job, self.spare, self.layout) if room and self.composition else None
            self._no_room[job.name] = Reason(room.code, f"{room.text}; {clause}") if clause else room
        return self._no_room[job.name]

    def shared(self, key: tuple, reason: Callable[[], Reason | None]) -> Reason | None:
        """`reason()`, worked out once per `key` in this plan: for a rule whose reason is the
        same for every job that `key` describes (a key starts with the rule's name)."""
        if key not in self._shared:
            self._shared[key] = reason()
        return self._shared[key]

    def free_mig_slices(self, profile: str) -> int:
        """Slices of the MIG profile that no job holds after the plan."""
        return mig.free_slices(self.s, self.layout, profile)

    @cached_property
    def shutting_down(self) -> list[Job]:
        """Pods evicted or deleted that still hold GPUs: theirs are free when they exit."""
        return [job for job in self.s.jobs if job.queue == TERMINATING_QUEUE and job.is_running]


def _refused(job: Job, j: Judged) -> Reason | None:
    return Reason("NotAllowedInQueue", j.refused[job.name]) if job.name in j.refused else None


def _unplaced(job: Job, j: Judged) -> Reason | None:
    return Reason("NotPlacedYet", "the plan chose it, but placing it found no node with room; "
                                  "it starts in a later plan") if job.name in j.unplaced else None


def _cut_short(job: Job, j: Judged) -> Reason | None:
    """The free GPUs would hold the job, but the solver stopped before it could place it."""
    if not j.cut_off or j.no_room(job) is not None:
        return None
    return Reason("PlanCutShort", "the plan's time limit ran out before it could be placed; it starts in a later plan")


#: Who is asked why a job waits, in order; the first answer is the reason. The queue's
#: admission and the cluster's shape first (they never change with a plan), then the
#: plan's own outcome, the limits, the room the plan leaves and the rules that keep it.
WAIT_RULES: tuple[Callable[[Job, Judged], Reason | None], ...] = (
    _refused, fits.why_never, _unplaced, limits.why_wait, fits.why_wait, _cut_short, inside.why_wait,
    claims.why_wait, reclaim.why_wait,
)


def wait_reason(job: Job, j: Judged) -> Reason:
    """Why `job` waits, judged on the cluster and the queues as the plan leaves them."""
    for why in WAIT_RULES:
        reason = why(job, j)
        if reason:
            return reason
    return Reason("NoRuleApplies", "free GPUs would fit it, but starting it breaks no rule the plan knows")


class NodeRoom(NamedTuple):
    """One node's free room after the plan."""

    name: str
    model: str | None
    free: int                           # healthy GPUs no job holds
    empty: bool                         # no job holds any of its GPUs
    shares: list[tuple]                 # (room, node, GPU, free) per healthy GPU not held whole with room left


def free_room_of(nl: NodeLayout) -> NodeRoom:
    """The free room of one node's layout (`layout.NodeLayout`)."""
    name, unhealthy = nl.node.name, nl.node.unhealthy_gpus
    free = used_any = 0
    shares = []
    for i, sl in enumerate(nl.slots):
        if sl.whole is not None:
            used_any = 1
            continue
        if sl.fractions:
            used_any = 1
            if i not in unhealthy and has_room(sl.used):
                shares.append((1 - sl.used, name, i, False))
        elif i not in unhealthy:
            free += 1
            shares.append((1, name, i, True))
    return NodeRoom(name, nl.node.gpu_model, free, not used_any, shares)


class FreeRoom:
    """The free GPUs the plan leaves, summed up once per GPU model for every reason: how many
    nodes have each number of free GPUs, and each GPU's room for fractions."""

    def __init__(self, nodes: list[NodeRoom], spare: dict[str, dict[str, float]], only: frozenset[str] | None = None):
        """`nodes`: every node's room (`Judged.node_rooms`); `only`: the nodes to look at (None: all)."""
        self.blocks: dict[str | None, Counter] = defaultdict(Counter)   # model -> free GPUs -> nodes
        self.shares: dict[str | None, list[tuple]] = defaultdict(list)  # model -> (room, node, GPU, free)
        self.where = "" if only is None else " of the nodes it may use"
        self.empty_nodes = 0
        self.spare = spare if only is None else {n: free for n, free in spare.items() if n in only}
        for nr in nodes:
            if only is not None and nr.name not in only:
                continue
            self.blocks[nr.model][nr.free] += 1
            self.shares[nr.model] += nr.shares
            self.empty_nodes += nr.empty

    @cached_property
    def most_spare(self) -> dict[str, float | None]:
        """The most CPUs and memory free on any node that declares them."""
        return {r: max((free[r] for free in self.spare.values() if r in free), default=None)
                for r in ("cpu", "memory_gib")}

    @cached_property
    def all_declare(self) -> dict[str, bool]:
        return {r: all(r in free for free in self.spare.values()) for r in ("cpu", "memory_gib")}

    def models(self, job: Job) -> list[str | None]:
        return [m for m in self.blocks if not job.gpu_model or m in job.gpu_model]

    def largest_block(self, job: Job | None = None) -> int:
        """The most free GPUs on one node, of the models the job accepts (None: any model)."""
        models = self.models(job) if job is not None else self.blocks
        return max((f for m in models for f, n in self.blocks[m].items() if n), default=0)

    def replicas_that_fit(self, job: Job) -> int:
        return sum(n * (f // int(job.gpus)) for m in self.models(job) for f, n in self.blocks[m].items())

    def free_gpus(self, job: Job) -> int:
        """Whole free GPUs of the models the job accepts, on all nodes together."""
        return sum(n * f for m in self.models(job) for f, n in self.blocks[m].items())


def start_reason() -> Reason:
    """A start on GPUs that are there (a start on GPUs being attached: `composition_start`)."""
    return Reason("Admitted", "")


def composition_start(when: str, action: str, reason: str) -> Reason:
    """A start or move onto GPUs the plan attaches: it happens `when` they are attached."""
    if action == "start":
        return Reason("WaitingForComposition", f"starts {when}")
    return Reason("MovedToDefragment", f"{reason}; {when}")


#: Who is asked why a running job is preempted, in order; the first answer is the reason.
PREEMPT_RULES: tuple[Callable[[Job, Judged, dict[str, list[Job]]], Reason | None], ...] = (
    reclaim.why_preempt, inside.why_preempt,
)


def preempt_reason(job: Job, j: Judged, started: dict[str, list[Job]]) -> Reason:
    """Why a running job is preempted; `started`: the jobs the plan starts, per queue (so that
    each reason reads only its own queue's starts). An idle job says so (`victims.why_first`)."""
    q = job.queue
    why = Reason("Preempted", f"preempted: {q} held {j.before[q]:g} GPUs and keeps {j.after[q]:g}")
    for rule in PREEMPT_RULES:
        reason = rule(job, j, started)
        if reason:
            why = reason
            break
    first = victims.why_first(job, j)
    return Reason(why.code, f"{why.text}; {first}") if first else why


def move_reason(job: Job, to: list[Placement], started: dict[str, list[Placement]]) -> Reason:
    """Why a running job restarts elsewhere: the jobs its old GPUs let start."""
    sources = sorted(set(job.running))
    names = sorted(name for name, replicas in started.items() if any(p.node in sources for p in replicas))
    gain = f"so that {', '.join(names)} fit{'s' if len(names) == 1 else ''} there" if names else "to make room"
    where = ", ".join(sorted({p.node for p in to}))
    return Reason("MovedToDefragment", f"moved from {', '.join(sources)} to {where} {gain}; restarts from its checkpoint")
