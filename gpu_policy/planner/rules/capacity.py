"""The capacity rows: fractions share a GPU while their sizes sum to at most one, and what
runs on a node fits in its GPUs, CPUs, memory and MIG slices; every started and moved replica
is placed on a detailed node (per GPU for fractions, per MIG slice) or a pool. `Room` is the
one place a capacity row is written, in plain numbers that a program turns into constraints
over its own variables (the planner's program here, and the simulator's `ours-*` window
program); "a fraction fits on a GPU" is `gpu_policy.model.layout.fits_on_gpu`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.model.layout import Layout, NodeLayout, per_gpu
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.scope import Scope
from gpu_policy.planner.core.shapes import Shape
from gpu_policy.planner.core.telemetry import GpuLimits


def build_capacity(m: PlanProgram, s: Scenario, layout: Layout, sc: Scope, limits: GpuLimits) -> None:
    """Place every started and moved replica: per detailed node and GPU, and per pool."""
    jobs = {j.name: j for j in sc.movers}  # the jobs that may move: those `_items` and `_not_back_in_place` read
    items, started = _items(m, layout, sc, jobs)
    confined = {kind.shape: allowed for kind in m.decisions.starts
                if (allowed := sc.confine(m.decisions.kinds[kind][0])) is not None}
    for shape, demand in items.items():
        _places(m, layout, sc, shape, demand, started[shape], confined.get(shape))
        _not_back_in_place(m, sc, shape, jobs, started[shape])
        _all_placed(m, shape, demand, started[shape])
    for n in sc.detailed:
        _node_capacity(m, s, layout, n, limits)
    for model, pooled in sc.pools.items():
        _pool_capacity(m, layout, model, pooled, sc.cuts)


def _items(m: PlanProgram, layout: Layout, sc: Scope, jobs: dict[str, Job]) -> tuple[dict, dict]:
    """Per shape, the replicas to place as {decision: replicas}: of all started and moved
    jobs, and of the started ones only (`Placements.started_items`). Notes the GPU each
    moving fraction leaves."""
    items: dict[Shape, dict] = defaultdict(dict)  # shape -> {decision: replicas}
    started: dict[Shape, dict] = defaultdict(dict)
    for kind, var in m.decisions.starts.items():
        items[kind.shape][var] = kind.replicas
        started[kind.shape][var] = kind.replicas
    for name, var in m.decisions.move.items():
        items[sc.shape(jobs[name])][var] = jobs[name].replicas
        if jobs[name].is_fractional:
            m.decisions.fraction_gpu[name] = layout.indices[name][0][0]
    m.placement.started_items = started
    return items, started


def _places(m: PlanProgram, layout: Layout, sc: Scope, shape: Shape, demand: dict, started: dict,
            allowed: frozenset[str] | None) -> None:
    """The places a replica of `shape` may take: each detailed node it fits (each GPU open
    to new fractions, for a fraction), and each pool of nodes it fits (started jobs only);
    a shape a rule confines (`allowed`: its nodes) only the detailed nodes and pools among them."""
    most = sum(a * var.upBound for var, a in demand.items())
    p = m.placement
    for n in sc.detailed:
        if allowed is not None and n not in allowed:
            continue
        node = layout.nodes[n].node
        if not (shape.fits(node) or (m.growth is not None and m.growth.fits(shape, n))):
            continue
        if shape.fractional:
            for i in sc.fraction_gpus.get(n, ()):
                p.frac[n, i, shape] = m.var("frac", 0, min(most, per_gpu(shape.gpus)), "Integer", 0)
        else:
            p.whole[n, shape] = m.var("whole", 0, min(most, layout.nodes[n].capacity // shape.whole_gpus),
                                      "Integer", 0)
    if not shape.fractional:
        for model, pooled in sc.pools.items():
            if allowed is not None and not allowed.issuperset(pooled):
                continue
            if any(shape.fits(layout.nodes[n].node) for n in pooled):
                p.pool[model, shape] = m.var("pool", 0, sum(a * v.upBound for v, a in started.items()), "Integer", 0)


def _all_placed(m: PlanProgram, shape: Shape, demand: dict, started: dict) -> None:
    """Every replica of the shape's started and moved jobs has a place; moved ones on
    detailed nodes."""
    p = m.placement
    placed = {v: -1 for (n, sh), v in p.whole.items() if sh == shape}
    placed.update({v: -1 for (n, i, sh), v in p.frac.items() if sh == shape})
    pooled_terms = {v: -1 for (model, sh), v in p.pool.items() if sh == shape}
    # placed replicas of shape = replicas of its started and moved jobs
    m.add(affine({**demand, **placed, **pooled_terms}) == 0, "placed")
    if pooled_terms and len(started) < len(demand):
        # moved jobs go to detailed nodes only: pooled replicas <= started replicas
        m.add(affine({**started, **pooled_terms}) >= 0, "pool_starts")


def _not_back_in_place(m: PlanProgram, sc: Scope, shape: Shape, jobs: dict[str, Job], started: dict) -> None:
    """A moved job of one replica does not land where it runs (on its node, or for a
    fraction on its GPU): places there go to other jobs of its shape."""
    movers = [jobs[n] for n in m.decisions.move if sc.shape(jobs[n]) == shape]
    origins: dict[tuple, list[Job]] = defaultdict(list)
    for job in movers:
        if job.replicas == 1:
            origins[job.running[0], m.decisions.fraction_gpu.get(job.name)].append(job)
    for (node, gpu), mine in origins.items():
        var = m.placement.frac.get((node, gpu, shape)) if shape.fractional else m.placement.whole.get((node, shape))
        if var is None:
            continue
        others = {**started, **{m.decisions.move[j.name]: j.replicas for j in movers if j not in mine}}
        # places[origin] <= replicas of other started or moved jobs of the shape
        m.add(affine({var: 1, **{v: -a for v, a in others.items()}}) <= 0, "not_back")


def _node_capacity(m: PlanProgram, s: Scenario, layout: Layout, n: str, limits: GpuLimits) -> None:
    """Node n after the plan: what each healthy GPU holds, its MIG slices, its free GPUs
    opened for fractions in index order, and its GPUs, CPUs and memory."""
    nl = layout.nodes[n]
    stays = lambda name: m.decisions.keep.get(name)  # noqa: E731  (None: a constant, it stays)
    gpu_terms: dict = defaultdict(float)
    gpu_const = 0.0
    opened_free: list[pulp.LpVariable] = []
    new_fracs: dict[int, list] = defaultdict(list)
    for (node, i, shape), var in m.placement.frac.items():
        if node == n:
            new_fracs[i].append((shape, var))
    for i, slot in enumerate(nl.slots):
        if nl.healthy(i):
            const, opened = _gpu_rows(m, n, i, slot, new_fracs.get(i, []), stays, limits, gpu_terms)
            gpu_const += const
            if opened is not None:
                opened_free.append(opened)
    slice_rows(m, s, nl, n, stays)
    for lower, higher in zip(opened_free, opened_free[1:]):
        # free GPUs of a node are interchangeable: open them for fractions in index order
        m.add(affine({lower: 1, higher: -1}) >= 0, "order")
    for (node, shape), var in m.placement.whole.items():
        if node == n:
            gpu_terms[var] += shape.whole_gpus
    m.placement.node_used[n] = (dict(gpu_terms), gpu_const)
    added = m.growth.added(n) if m.growth else {}
    # whole GPUs kept + started + GPUs shared by fractions <= healthy GPUs of n (+ attached - detached)
    _add_room(m, node_gpus_room(gpu_terms, (), gpu_const, len(nl.node.healthy_gpus), added), "cap_gpu")
    for resource in ("cpu", "memory_gib"):
        _resource_row(m, s, nl, n, stays, resource)


def _gpu_rows(m: PlanProgram, n: str, i: int, slot, fresh: list, stays: Callable, limits: GpuLimits,
              node_terms: dict) -> tuple[float, pulp.LpVariable | None]:
    """GPU i of node n after the plan: its fractions and its whole holder, if kept, hold at
    most one GPU; whether it is shared. Adds the GPU's use to `node_terms`; returns the
    constant part of it, and the `shared` variable of a free GPU opened for fractions
    (None: none)."""
    const = 0.0
    if slot.whole:
        if stays(slot.whole) is not None:
            node_terms[stays(slot.whole)] += 1
        else:
            const += 1
    var_fracs: dict[pulp.LpVariable, float] = defaultdict(float)
    fixed_frac = 0.0
    for name, f in slot.fractions:
        if stays(name) is not None:
            var_fracs[stays(name)] += f
        else:
            fixed_frac += f
    if not fresh and not var_fracs:
        return const + (1 if slot.fractions else 0), None
    opened = None
    if fixed_frac > 0:
        const += 1  # shared by a job that stays: one used GPU
        m.placement.shared[n, i] = ({}, 1.0)
    else:
        used = _shared_rows(m, n, i, slot, var_fracs, fresh)
        node_terms[used] += 1
        opened = used if slot.free else None
    # fractions on GPU i + its whole holder if kept <= 1
    terms: dict = defaultdict(float)
    for keep, f in var_fracs.items():
        terms[keep] += f
    for shape, var in fresh:
        terms[var] += shape.gpus
    if slot.whole and stays(slot.whole) is not None:
        terms[stays(slot.whole)] += 1
    _add_room(m, gpu_room(terms, fixed_frac), "gpu")
    m.placement.gpu_used[n, i] = (dict(terms), fixed_frac)
    _telemetry_room(m, n, i, slot, fresh, limits)
    return const, opened


def _shared_rows(m: PlanProgram, n: str, i: int, slot, var_fracs: dict, fresh: list) -> pulp.LpVariable:
    """shared[n,i]: 1 if GPU i holds fractions after the plan (its whole holder, if any,
    has left), and only then."""
    used = m.var("shared", 0, 1, "Binary", 1 if slot.fractions else 0)
    m.placement.shared[n, i] = ({used: 1}, 0.0)
    for keep in var_fracs:
        # shared[n,i] >= keep[j] for each fraction j on GPU i
        m.add(affine({used: 1, keep: -1}) >= 0, "shared")
    for shape, var in fresh:
        # most * shared[n,i] >= frac[n,i,s]
        m.add(affine({used: var.upBound, var: -1}) >= 0, "shared")
    # shared[n,i] <= fractions kept + fractions placed on GPU i: shared only if used
    m.add(affine({used: 1, **{keep: -1 for keep in var_fracs}, **{var: -1 for _, var in fresh}}) <= 0,
          "shared")
    return used


def _resource_row(m: PlanProgram, s: Scenario, nl: NodeLayout, n: str, stays: Callable, resource: str) -> None:
    """CPUs (memory) of the jobs on node n after the plan <= what n has."""
    capacity = getattr(nl.node, resource)
    if capacity is None:
        return
    terms, const = defaultdict(float), 0.0
    for job in s.jobs:
        use = (getattr(job, resource) or 0) * job.running.count(n)
        if use and stays(job.name) is not None:
            terms[stays(job.name)] += use
        else:
            const += use
    for (node, shape), var in m.placement.whole.items():
        if node == n:
            terms[var] += getattr(shape, resource)
    for (node, i, shape), var in m.placement.frac.items():
        if node == n:
            terms[var] += getattr(shape, resource)
    if terms:
        # CPUs (memory) of the jobs on n after the plan <= what n has
        _add_room(m, node_room(terms, const, capacity), f"cap_{resource}")


def _add_room(m: PlanProgram, room: Room, kind: str) -> None:
    """A capacity row (`Room`) as a constraint over the program's variables."""
    m.add(room.constraint(), kind)


def _telemetry_room(m: PlanProgram, n: str, i: int, slot, fresh: list, limits: GpuLimits) -> None:
    """A GPU that is busy or short of framebuffer takes a new fraction only if every
    occupant leaves (telemetry headroom is judged on the occupants that stay), and then
    only jobs that start: a moved job would bring its load along."""
    occupants = [name for name, _ in slot.fractions] + ([slot.whole] if slot.whole else [])
    for shape, var in fresh:
        if not occupants or limits.room_for_fraction(n, i, shape.gpus):
            continue
        # frac[n,i,s] <= replicas of started jobs of shape s
        m.add(affine({var: 1, **{v: -a for v, a in m.placement.started_items.get(shape, {}).items()}}) <= 0, "headroom")
        for name in occupants:
            if name in m.decisions.keep:
                # frac[n,i,s] <= most * (1 - keep[j])
                m.add(affine({var: 1, m.decisions.keep[name]: var.upBound}) <= var.upBound, "headroom")
            else:
                var.upBound = 0


def _pool_capacity(m: PlanProgram, layout: Layout, model: str | None, pooled: list[str],
                   cuts: dict[str, list[Job]]) -> None:
    """One row per job size: jobs of at least s GPUs, counted in units of s, fit in the
    sum over pooled nodes of floor(free / s), where a reclaim node's free GPUs grow with
    the option the plan takes there. Exact when the sizes divide each other."""
    mine = {shape: var for (mdl, shape), var in m.placement.pool.items() if mdl == model}
    if not mine:
        return
    free = {n: len(layout.nodes[n].free_indices()) for n in pooled}
    freed = {n: _freed_by_options(m, layout, n, free[n], cuts) for n in pooled if n in m.decisions.options}
    for size in sorted({shape.whole_gpus for shape in mine}):
        terms = {var: shape.whole_gpus / size for shape, var in mine.items() if shape.whole_gpus >= size}
        for n in pooled:
            for w, free_after in freed.get(n, ()):
                terms[w] = terms.get(w, 0) - (free_after // size - free[n] // size)
        # sum over shapes of size >= s of (size / s) * pool[m, shape]
        #   <= sum_n floor(free_n / s) + sum over reclaim options of the blocks they add
        m.add(affine(terms) <= sum(f // size for f in free.values()), "pool_rows")


def _freed_by_options(m: PlanProgram, layout: Layout, n: str, free: int, cuts: dict[str, list[Job]]) -> list[tuple]:
    """(option, free GPUs of reclaim node n once the option preempts its victims) per option."""
    out = []
    for w, job in zip(m.decisions.options[n], cuts.get(n, ())):
        free += sum(1 for i in layout.indices[job.name][0] if layout.nodes[n].healthy(i))
        out.append((w, free))
    return out


def slice_rows(m, s: Scenario, nl: NodeLayout, n: str, stays: Callable[[str], pulp.LpVariable | None]) -> None:
    """For each MIG profile of node n: slices kept + slices placed <= the node's slices."""
    node = nl.node
    if not node.mig:
        return
    jobs = {j.name: j for j in s.jobs if j.mig_profile}
    terms: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    fixed: dict[str, float] = defaultdict(float)
    for slot in nl.slots:
        for name, _ in slot.fractions:
            if name in jobs:
                profile, keep = jobs[name].mig_profile, stays(name)
                if keep is None:
                    fixed[profile] += 1
                else:
                    terms[profile][keep] += 1
    for (node_name, _, shape), var in m.placement.frac.items():
        if node_name == n and shape.mig_profile:
            terms[shape.mig_profile][var] += 1
    for profile, count in sorted(node.mig.items()):
        if terms[profile]:
            # slices of the profile kept and placed on node n <= its slices of the profile
            m.add(pulp.LpAffineExpression(list(terms[profile].items()), fixed[profile]) <= count, "mig")


@dataclass(frozen=True)
class Room:
    """One capacity row: sum(amount x decision) over `use` + `held` <= `capacity` +
    sum(amount x decision) over `grows`. What the plan's decisions put on a GPU or a node,
    beside what stays there, fits in what it has, which decisions may grow or shrink (GPUs
    attached or detached by composition). The decisions are the caller's (a program's
    variables, or any key it maps to one)."""

    use: dict[Hashable, float]
    held: float
    capacity: float
    grows: dict[Hashable, float] = field(default_factory=dict)

    def terms(self) -> dict[Hashable, float]:
        """The row's left side, with what grows the capacity moved over: <= capacity - held."""
        return {**self.use, **{v: -a for v, a in self.grows.items()}}

    def constraint(self) -> pulp.LpConstraint:
        """The row over a program's variables (the decisions are PuLP variables)."""
        return affine(self.terms(), self.held) <= self.capacity


def gpu_room(fractions: Mapping[Hashable, float], held: float = 0.0, opened: Hashable | None = None,
             one: float = 1.0) -> Room:
    """`fits_on_gpu` as a row: the fractions placed on one GPU and the part it already holds
    sum to at most one GPU. `opened`: the 0/1 decision that opens a free GPU for fractions,
    so they fit there only where it is opened. `one`: one GPU in the caller's unit (1, or
    1,000 thousandths)."""
    if opened is None:
        return Room(dict(fractions), held, one)
    return Room(dict(fractions), held, 0.0, {opened: one})


def node_gpus_room(whole: Mapping[Hashable, float], opened: Iterable[Hashable], held: float, gpus: float,
                   attached: Mapping[Hashable, float] | None = None) -> Room:
    """A node's GPUs: whole GPUs taken, plus each GPU that holds fractions (`opened`, one
    GPU each: a shared GPU is not free for whole-GPU work), plus those that stay taken, at
    most its GPUs and those `attached` (+1 per GPU attached, -1 per GPU detached)."""
    return Room({**whole, **dict.fromkeys(opened, 1.0)}, held, gpus, dict(attached or {}))


def node_room(use: Mapping[Hashable, float], held: float, capacity: float) -> Room:
    """A node's CPUs or memory: what the placed work asks for, plus what stays, at most
    what the node has."""
    return Room(dict(use), held, capacity)
