"""Which GPU index of which node each running replica holds.

Given ``gpu_indices`` are kept. The rest are assigned the same way every time:
whole-GPU replicas take the lowest free healthy indices; fractional replicas go
first-fit onto GPUs already shared, else onto the lowest free healthy GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

from gpu_policy.errors import ScenarioError, job_path
from gpu_policy.model import Job, Node, Scenario
from gpu_policy.plan import Placement
from gpu_policy.planner.rules.fits import fits_on_gpu


@dataclass(slots=True)
class GpuSlot:
    """One GPU: held whole by one replica, shared by fractions, or free. `fractions` is a
    tuple, replaced when it changes, so copies of a layout share it."""

    whole: str | None = None
    fractions: tuple[tuple[str, float], ...] = ()

    @property
    def used(self) -> float:
        return 1.0 if self.whole else sum(f for _, f in self.fractions)

    @property
    def free(self) -> bool:
        return self.whole is None and not self.fractions


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
    nodes: dict[str, NodeLayout]
    indices: dict[str, list[list[int]]]  # job name -> indices per running replica
    hosts: dict[str, list[str]] = field(default_factory=dict)  # job name -> node per running replica
    borrowed: set[str] = field(default_factory=set)  # nodes whose NodeLayout another layout shares

    def own(self, node: str) -> NodeLayout:
        """The node's layout, copied first if it is shared with another layout (copy on write)."""
        if node in self.borrowed:
            nl = self.nodes[node]
            self.nodes[node] = NodeLayout(nl.node, [GpuSlot(sl.whole, sl.fractions) for sl in nl.slots])
            self.borrowed.discard(node)
        return self.nodes[node]

    def release(self, node: str, job: str) -> None:
        """Take every replica of `job` off `node`."""
        for slot in self.own(node).slots:
            if slot.whole == job:
                slot.whole = None
            slot.fractions = tuple((j, f) for j, f in slot.fractions if j != job)


def running_layout(s: Scenario) -> Layout:
    """Place every running replica on GPU indices; raise if one cannot fit."""
    nodes = {n.name: NodeLayout(n, [GpuSlot() for _ in range(n.gpus)]) for n in s.nodes}
    running = [j for j in s.jobs if j.running]
    indices: dict[str, list[list[int]]] = {}
    whole: list[Job] = []
    fractional: list[Job] = []
    for job in running:  # given indices first: they are facts about the cluster
        if job.gpu_indices is None:
            (fractional if job.is_fractional else whole).append(job)
            continue
        indices[job.name] = [list(ix) for ix in job.gpu_indices]
        for node_name, ix in zip(job.running, job.gpu_indices):
            for i in ix:
                _occupy(nodes[node_name].slots[i], job)
    free: dict[str, list[int]] = {}  # node -> its free indices in `NodeLayout.order`, once a replica asks
    _assign_whole(s, nodes, free, whole, indices)  # then whole jobs
    for job in fractional:  # then fractions
        indices[job.name] = [_assign_fraction(s, nodes[n], free, job) for n in job.running]
    return Layout(nodes, indices, {j.name: list(j.running) for j in running})


def _free_in_order(nl: NodeLayout) -> list[int]:
    """The node's free indices in `NodeLayout.order`. `running_layout` lists them once per
    node (in `free`), and the replicas it places there take them from the front."""
    slots = nl.slots
    return [i for i in nl.order if slots[i].whole is None and not slots[i].fractions]


def _assign_whole(s: Scenario, nodes: dict[str, NodeLayout], free: dict[str, list[int]], jobs: list[Job],
                  indices: dict[str, list[list[int]]]) -> None:
    """The indices each replica of the whole-GPU `jobs` (without given indices) takes, in
    their order: the lowest free ones."""
    for job in jobs:
        need, name, picks = int(job.gpus), job.name, []
        for n in job.running:
            nl = nodes[n]
            mine = _free_list(free, nl)
            if len(mine) < need:
                _no_room(s, job, n)
            picked = mine[:need]
            del mine[:need]
            slots = nl.slots
            for i in picked:
                slots[i].whole = name
            picks.append(picked)
        indices[name] = picks


def _free_list(free: dict[str, list[int]], nl: NodeLayout) -> list[int]:
    """The node's free GPUs not yet taken, in the order they are taken (listed on first use)."""
    mine = free.get(nl.node.name)
    if mine is None:
        mine = free[nl.node.name] = _free_in_order(nl)
    return mine


def _occupy(slot: GpuSlot, job: Job) -> None:
    if job.is_fractional:
        slot.fractions += ((job.name, job.gpus),)
    else:
        slot.whole = job.name


def _assign_fraction(s: Scenario, nl: NodeLayout, free: dict[str, list[int]], job: Job) -> list[int]:
    """The GPU one fractional replica takes on `nl`'s node: the first shared one it fits
    beside, else the lowest free one."""
    slots = nl.slots
    picked = [i for i in nl.order if slots[i].fractions and fits_on_gpu(slots[i].used, job.gpus)][:1]
    if not picked:
        mine = _free_list(free, nl)
        picked = mine[:1]
        del mine[:1]
    if not picked:
        _no_room(s, job, nl.node.name)
    slots[picked[0]].fractions += ((job.name, job.gpus),)
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
        nodes[name] = NodeLayout(nl.node, [GpuSlot(None if s.whole in gone else s.whole,
                                                   tuple((j, f) for j, f in s.fractions if j not in gone))
                                           for s in nl.slots])
    indices, hosts = dict(layout.indices), dict(layout.hosts)
    for job in gone:
        indices.pop(job, None)
        hosts.pop(job, None)
    return Layout(nodes, indices, hosts, set(layout.nodes) - touched)


def place(layout: Layout, job: Job, node: str, gpu: int | None = None) -> list[int]:
    """Put one replica of a starting job on `node` (a fraction on GPU `gpu`)."""
    nl = layout.own(node)
    if job.is_fractional:
        picked = [gpu]
    else:
        picked = nl.free_indices()[: int(job.gpus)]
    for i in picked:
        _occupy(nl.slots[i], job)
    layout.indices.setdefault(job.name, []).append(picked)
    layout.hosts.setdefault(job.name, []).append(node)
    return picked


def place_at(layout: Layout, job: Job, node: str, indices: list[int]) -> None:
    """Put one replica of `job` back on the very GPU indices it holds."""
    nl = layout.own(node)
    for i in indices:
        _occupy(nl.slots[i], job)
    layout.indices.setdefault(job.name, []).append(list(indices))
    layout.hosts.setdefault(job.name, []).append(node)


def spare_resources(s: Scenario, running: set[str], placed: dict[str, list[Placement]] | None = None) -> dict:
    """Free CPU and memory per node, for the resources each node declares, when the
    `running` jobs run: on the nodes in `placed` for jobs that have a new placement,
    else where they run now. Nodes that declare neither share one empty dict."""
    placed = placed or {}
    none: dict[str, float] = {}
    spare = {n.name: ({r: getattr(n, r) for r in ("cpu", "memory_gib") if getattr(n, r) is not None}
                      if n.cpu is not None or n.memory_gib is not None else none) for n in s.nodes}
    for job in s.jobs:
        if not (job.cpu or job.memory_gib) or job.name not in running:
            continue
        nodes = [p.node for p in placed[job.name]] if job.name in placed else job.running
        for n in nodes:
            for r in spare[n]:
                spare[n][r] -= getattr(job, r) or 0
    return spare

