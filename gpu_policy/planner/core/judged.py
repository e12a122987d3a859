"""The state a reason is judged on (`Judged`): the cluster and the queues as the plan leaves
them, and the free room after it (`FreeRoom`), summed up once for every reason. The rules
write the reasons (`gpu_policy.planner.core.rule.Rule.why_wait` and the like) from it."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from gpu_policy.model import TERMINATING_QUEUE, Job, Scenario, placement
from gpu_policy.model.layout import Layout, NodeLayout, has_room
from gpu_policy.planner.core import mig
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.queues import QueueTree, Shares
from gpu_policy.planner.core.shapes import Eligible, NodeKind
from gpu_policy.planner.core.telemetry import GpuLimits


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
    room_reason: Callable[[Job, Judged], Reason | None] = lambda job, judged: None  # why the free room cannot
    # hold a job (the rules' answer: `gpu_policy.planner.ruleset.RuleSet.no_room`)
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
        """Why the GPUs the plan leaves free cannot hold the job (`room_reason`), or None if
        they could; worked out once per job."""
        if job.name not in self._no_room:
            self._no_room[job.name] = self.room_reason(job, self)
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


