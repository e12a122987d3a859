"""Which GPU index of which node each running replica holds.

Given ``gpu_indices`` are kept. The rest are assigned the same way every time:
whole-GPU replicas take the lowest free healthy indices; fractional replicas go
first-fit onto GPUs already shared, else onto the lowest free healthy GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NoReturn

from gpu_policy.errors import ScenarioError, job_path
from gpu_policy.model import EPS, Job, Node, Scenario
from gpu_policy.model.plan import Placement


def fits_on_gpu(used: float, gpus: float) -> bool:
    """Whether a fraction of `gpus` fits beside the `used` part of one GPU."""
    return used + gpus <= 1 + EPS


def has_room(used: float) -> bool:
    """Whether a GPU holding the `used` part has any room left for a fraction."""
    return used < 1 - EPS


def per_gpu(gpus: float) -> int:
    """How many fractions of `gpus` one GPU holds."""
    return math.floor(1 / gpus + EPS)


@dataclass(slots=True, eq=False)
class GpuSlot:
    """One GPU: held whole by one replica, shared by fractions, or free. Never changed (not
    frozen: that makes one a third as costly to make): a layout puts a new slot in its
    place, so layouts share slots freely. Every free GPU of `running_layout` is `FREE`, and
    all the GPUs one whole job holds there are one slot."""

    whole: str | None = None
    fractions: tuple[tuple[str, float], ...] = ()

    @property
    def used(self) -> float:
        return 1.0 if self.whole else sum(f for _, f in self.fractions)

    @property
    def free(self) -> bool:
        return self.whole is None and not self.fractions


#: The slot of a free GPU.
FREE = GpuSlot()


def _slot(whole: str | None, fractions: tuple[tuple[str, float], ...]) -> GpuSlot:
    return GpuSlot(whole, fractions) if whole or fractions else FREE


def _without(slot: GpuSlot, gone: set[str]) -> GpuSlot:
    """`slot` without the replicas of the jobs in `gone` (`slot` itself if it has none)."""
    whole = None if slot.whole in gone else slot.whole
    fractions = tuple(f for f in slot.fractions if f[0] not in gone)
    return slot if whole == slot.whole and len(fractions) == len(slot.fractions) else _slot(whole, fractions)


@dataclass(slots=True)
class NodeLayout:
    node: Node
    slots: list[GpuSlot]

    def healthy(self, index: int) -> bool:
        return index not in self.node.unhealthy_gpus

    @property
    def order(self) -> list[int]:
        """GPU indices in the order running replicas take them: healthy ones first."""
        every = range(len(self.slots))
        bad = self.node.unhealthy_gpus
        return [i for i in every if i not in bad] + [i for i in every if i in bad] if bad else list(every)

    def free_indices(self) -> list[int]:
        """Healthy GPUs that hold nothing, lowest first."""
        bad = self.node.unhealthy_gpus
        return [i for i, s in enumerate(self.slots) if s.whole is None and not s.fractions and i not in bad]

    @property
    def capacity(self) -> int:
        """Healthy GPUs of the node as this layout has it (a composable node's slots include
        the GPUs it could take, gpu_policy.planner.rules.composition)."""
        return len(self.slots) - sum(1 for i in set(self.node.unhealthy_gpus) if i < len(self.slots))


@dataclass
class Layout:
    """Where every replica is. Layouts share their `NodeLayout`s (copy on write, `own`) and
    the lists in `indices` and `hosts` (never changed in place; `hosts` of `running_layout`
    are the jobs' own `running` lists)."""

    nodes: dict[str, NodeLayout]
    indices: dict[str, list[list[int]]]  # job name -> indices per running replica
    hosts: dict[str, list[str]] = field(default_factory=dict)  # job name -> node per running replica
    borrowed: set[str] = field(default_factory=set)  # nodes whose NodeLayout another layout shares

    def own(self, node: str) -> NodeLayout:
        """The node's layout, copied first if it is shared with another layout (copy on write)."""
        if node in self.borrowed:
            nl = self.nodes[node]
            self.nodes[node] = NodeLayout(nl.node, list(nl.slots))
            self.borrowed.discard(node)
        return self.nodes[node]

    def release(self, node: str, job: str) -> None:
        """Take every replica of `job` off `node`."""
        slots, gone = self.own(node).slots, {job}
        slots[:] = [_without(slot, gone) for slot in slots]

    def add(self, job: str, node: str, indices: list[int]) -> None:
        """Note one more replica of `job`, on `indices` of `node` (new lists: others may share the old)."""
        self.indices[job] = [*self.indices.get(job, ()), indices]
        self.hosts[job] = [*self.hosts.get(job, ()), node]


def running_layout(s: Scenario) -> Layout:
    """Place every running replica on GPU indices; raise if one cannot fit."""
    nodes = {n.name: NodeLayout(n, [FREE] * n.gpus) for n in s.nodes}
    hosts: dict[str, list[str]] = {}
    indices: dict[str, list[list[int]]] = {}
    whole: list[Job] = []
    fractional: list[Job] = []
    given: set[str] = set()  # nodes with given indices
    for job in s.jobs:  # given indices first: they are facts about the cluster
        if not job.running:
            continue
        hosts[job.name] = job.running
        if job.gpu_indices is None:
            (fractional if job.is_fractional else whole).append(job)
            continue
        indices[job.name] = [list(ix) for ix in job.gpu_indices]
        for node_name, ix in zip(job.running, job.gpu_indices):
            _occupy(nodes[node_name].slots, ix, job)
        given.update(job.running)
    free = {name: _free_in_order(nl) if name in given else nl.order for name, nl in nodes.items()}
    _assign_whole(s, nodes, free, whole, indices)  # then whole jobs
    for job in fractional:  # then fractions
        indices[job.name] = [_assign_fraction(s, nodes[n], free[n], job) for n in job.running]
    return Layout(nodes, indices, hosts)


def _free_in_order(nl: NodeLayout) -> list[int]:
    """The node's free indices in `NodeLayout.order` (on a node no given indices fall on,
    all of them). `running_layout` lists them once per node, and the replicas it places
    there take them from the front."""
    slots = nl.slots
    return [i for i in nl.order if slots[i] is FREE]


def _assign_whole(s: Scenario, nodes: dict[str, NodeLayout], free: dict[str, list[int]], jobs: list[Job],
                  indices: dict[str, list[list[int]]]) -> None:
    """The indices each replica of the whole-GPU `jobs` (without given indices) takes, in
    their order: the lowest free ones (`free`, which they take)."""
    for job in jobs:
        need, held, picks = int(job.gpus), GpuSlot(job.name), []
        for n in job.running:
            mine = free[n]
            if len(mine) < need:
                _no_room(s, job, n)
            picked = mine[:need]
            del mine[:need]
            slots = nodes[n].slots
            for i in picked:
                slots[i] = held
            picks.append(picked)
        indices[job.name] = picks


def _occupy(slots: list[GpuSlot], indices: list[int], job: Job) -> None:
    """Put one replica of `job` on `indices` of a node's `slots`."""
    if job.is_fractional:
        share = ((job.name, job.gpus),)
        for i in indices:
            slots[i] = GpuSlot(slots[i].whole, slots[i].fractions + share)
    else:
        for i in indices:
            slots[i] = GpuSlot(job.name, slots[i].fractions)


def _assign_fraction(s: Scenario, nl: NodeLayout, free: list[int], job: Job) -> list[int]:
    """The GPU one fractional replica takes on `nl`'s node: the first shared one it fits
    beside, else the lowest `free` one (which it takes)."""
    slots = nl.slots
    picked = [i for i in nl.order if slots[i].fractions and fits_on_gpu(slots[i].used, job.gpus)][:1]
    if not picked:
        picked = free[:1]
        del free[:1]
    if not picked:
        _no_room(s, job, nl.node.name)
    _occupy(slots, picked, job)
    return picked


def _no_room(s: Scenario, job: Job, node: str) -> NoReturn:
    """A running replica of `job` that `node` has no GPU left for: the snapshot is wrong."""
    where = next(i for i, j in enumerate(s.jobs) if j.name == job.name)
    raise ScenarioError(s.source, f"{job_path(where, job.name)}.running",
                        f"node {node!r} has no free GPU indices left for it")


def layout_after(layout: Layout, gone: set[str]) -> Layout:
    """`layout` without the replicas of the jobs in `gone`. Nodes they did not run on are
    shared with `layout` until something is placed on them (`Layout.own`)."""
    touched = {node for job in gone for node in layout.hosts.get(job, ())}
    nodes = dict(layout.nodes)
    for name in touched:
        nl = nodes[name]
        nodes[name] = NodeLayout(nl.node, [_without(slot, gone) for slot in nl.slots])
    indices, hosts = dict(layout.indices), dict(layout.hosts)
    for job in gone:
        indices.pop(job, None)
        hosts.pop(job, None)
    return Layout(nodes, indices, hosts, set(layout.nodes) - touched)


def place(layout: Layout, job: Job, node: str, gpu: int | None = None) -> list[int]:
    """Put one replica of a starting job on `node` (a fraction on GPU `gpu`)."""
    slots = layout.own(node).slots
    if job.is_fractional:
        picked = [gpu]
        _occupy(slots, picked, job)
    else:
        picked, held = layout.nodes[node].free_indices()[: int(job.gpus)], GpuSlot(job.name)
        for i in picked:  # free GPUs: no fractions to keep
            slots[i] = held
    layout.add(job.name, node, picked)
    return picked


def place_at(layout: Layout, job: Job, node: str, indices: list[int]) -> None:
    """Put one replica of `job` back on the very GPU indices it holds."""
    _occupy(layout.own(node).slots, indices, job)
    layout.add(job.name, node, list(indices))


def spare_resources(s: Scenario, running: set[str] | None = None,
                    placed: dict[str, list[Placement]] | None = None) -> dict:
    """Free CPU and memory per node, for the resources each node declares, when the
    `running` jobs (default: those running now) run: on the nodes in `placed` for jobs
    that have a new placement, else where they run now. Nodes that declare neither share
    one empty dict."""
    placed = placed or {}
    none: dict[str, float] = {}
    spare = {n.name: ({r: getattr(n, r) for r in ("cpu", "memory_gib") if getattr(n, r) is not None}
                      if n.cpu is not None or n.memory_gib is not None else none) for n in s.nodes}
    if not any(spare.values()):  # no node declares either: no job takes anything off
        return spare
    for job in s.jobs:
        if not (job.cpu or job.memory_gib) or not (job.running if running is None else job.name in running):
            continue
        nodes = [p.node for p in placed[job.name]] if job.name in placed else job.running
        for n in nodes:
            for r in spare[n]:
                spare[n][r] -= getattr(job, r) or 0
    return spare

