"""The integer program: decisions, and the capacity of every node and pool.

Variables (only where a decision exists; everything else is a constant), named from
indices, never from user strings:
  keep[j]        1 if running candidate j stays where it is
  move[j]        1 if running candidate j restarts elsewhere (all its replicas)
  starts[k]      how many waiting jobs of kind k start (the oldest first; all replicas of
                 a job: gangs are all-or-nothing)
  whole[n, s]    replicas of whole-GPU shape s placed on detailed node n
  frac[n, i, s]  replicas of fractional shape s placed on GPU i of detailed node n
  pool[m, s]     replicas of shape s placed on pooled nodes of GPU model m
A candidate that neither keeps nor moves is preempted. The queue rules are in
`gpu_policy.planner.accounting`, the objectives in `gpu_policy.planner.objectives`. Nodes
that may gain or lose GPUs in the plan (composition) reach the capacity rows through
`Growth`, which `gpu_policy.planner.attach` fills.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.planner import mig
from gpu_policy.planner.layout import Layout
from gpu_policy.planner.rules.fits import per_gpu
from gpu_policy.planner.rules.vocabulary import STRICT
from gpu_policy.planner.scope import Scope
from gpu_policy.planner.shapes import Kind, NodeKind, Shape, node_kinds, shape_of
from gpu_policy.planner.telemetry import GpuLimits


def affine(terms: dict, constant: float = 0.0) -> pulp.LpAffineExpression:
    """A linear expression from {variable: coefficient}: much faster than lpSum."""
    return pulp.LpAffineExpression([(v, c) for v, c in terms.items() if c], constant)


def most(terms: dict) -> float:
    """The largest value sum |coefficient| * variable can take (every variable is bounded)."""
    return sum(abs(a) * max(abs(v.lowBound or 0), abs(v.upBound)) for v, a in terms.items())


@dataclass
class Program:
    """A PuLP problem and its objectives, solved in strict order (`solve_stages`)."""

    prob: pulp.LpProblem
    x: dict = field(default_factory=dict)  # placement options of `gpu_policy.sim`'s window program
    stages: list[tuple[str, pulp.LpAffineExpression]] = field(default_factory=list)
    initial: dict = field(default_factory=dict)  # variable -> value of the do-nothing plan
    held: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # stage -> variables held at 0 before it


@dataclass
class Growth:
    """Detailed nodes whose GPUs the plan may change (GPU composition, `gpu_policy.planner.attach`).
    Their layout holds a free slot for each GPU they could take, beyond their own."""

    fits: Callable[[Shape, str], bool]  # could one replica of the shape run on the node once GPUs are attached
    attach: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # node -> GPUs attached (per model)
    detach: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # node -> 1 per GPU it gives back
    room: dict[str, int] = field(default_factory=dict)  # node -> most GPUs it could take
    attach_first: bool = True  # before_preemption: a victim that GPUs yet to attach could hold is not preempted

    def added(self, n: str) -> dict:
        """{variable: coefficient}: GPUs node n has after the plan, less the GPUs it has now."""
        return {**{v: 1 for v in self.attach.get(n, ())}, **{v: -1 for v in self.detach.get(n, ())}}

    def for_victims(self, n: str) -> tuple[dict, float]:
        """GPUs beyond its own that node n leaves a victim, as (terms, constant): with
        attaching first, also those it could still take (a victim they hold moves, not goes)."""
        if self.attach_first:
            return {v: -1 for v in self.detach.get(n, ())}, float(self.room.get(n, 0))
        return self.added(n), 0.0


@dataclass
class PlanProgram(Program):
    """The planner's program: the decisions it reads back, by job, node and shape."""

    keep: dict[str, pulp.LpVariable] = field(default_factory=dict)
    move: dict[str, pulp.LpVariable] = field(default_factory=dict)
    cut: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # victim on a reclaim node -> the
    # node's options that preempt it (option k preempts the node's first k victims)
    options: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # reclaim node -> its options
    starts: dict[Kind, pulp.LpVariable] = field(default_factory=dict)
    kinds: dict[Kind, list[Job]] = field(default_factory=dict)  # the jobs of each kind it may start, oldest first
    whole: dict[tuple[str, Shape], pulp.LpVariable] = field(default_factory=dict)
    frac: dict[tuple[str, int, Shape], pulp.LpVariable] = field(default_factory=dict)
    pool: dict[tuple[str | None, Shape], pulp.LpVariable] = field(default_factory=dict)
    receives: dict[str, dict[str, pulp.LpVariable]] = field(default_factory=dict)  # queue -> tier -> binary
    gives: dict[str, dict[str, pulp.LpVariable]] = field(default_factory=dict)  # queue -> tier -> GPUs given
    inside: dict[str, pulp.LpVariable] = field(default_factory=dict)  # victim -> 1 if preempted for its own queue
    largest: dict[str, dict[float, pulp.LpVariable]] = field(default_factory=dict)  # queue -> size -> 1 if its
    # largest victim given to other queues has that size
    victims: set[str] = field(default_factory=set)  # candidates that may be preempted
    fraction_gpu: dict[str, int] = field(default_factory=dict)  # running fractional job -> its GPU
    started_items: dict[Shape, dict] = field(default_factory=dict)  # shape -> {start[p]: replicas}
    node_used: dict[str, tuple[dict, float]] = field(default_factory=dict)  # detailed node -> GPUs used after
    gpu_used: dict[tuple[str, int], tuple[dict, float]] = field(default_factory=dict)  # shared GPU -> use after
    shared: dict[tuple[str, int], tuple[dict, float]] = field(default_factory=dict)  # GPU -> 1 if shared after
    growth: Growth | None = None  # composable nodes (None: no node changes its GPUs)
    counter: int = 0

    def var(self, kind: str, low: float = 0, high: float | None = None, cat: str = "Continuous",
            initial: float | None = None) -> pulp.LpVariable:
        """A new variable named from its kind and an index; `initial`: its do-nothing value."""
        self.counter += 1
        v = pulp.LpVariable(f"{kind}{self.counter}", low, high, cat)
        if initial is not None:
            self.initial[v] = initial
        return v

    def binary(self, kind: str, initial: float | None = None) -> pulp.LpVariable:
        return self.var(kind, 0, 1, "Binary", initial)

    def add(self, constraint, kind: str) -> None:
        self.counter += 1
        self.prob += constraint, f"{kind}{self.counter}"

    def runs(self, job: Job) -> tuple[dict, float]:
        """'running job runs after the plan' (kept or moved) as (terms, constant)."""
        if job.name in self.keep:
            terms = {self.keep[job.name]: 1}
            if job.name in self.move:
                terms[self.move[job.name]] = 1
            return terms, 0.0
        if job.name in self.cut:
            return {w: -1 for w in self.cut[job.name]}, 1.0
        return {}, 1.0

    def started(self, which=lambda kind: True) -> dict:
        """{starts[k]: GPUs of one job of kind k} for the kinds `which` admits."""
        return {var: kind.total_gpus for kind, var in self.starts.items() if which(kind)}

    def preempted(self, job: Job, part: str = "all") -> tuple[dict, float]:
        """'job is preempted' as (terms, constant); `part` "cross" or "inside": preempted for
        another queue, or for its own queue's higher priority."""
        if part == "inside":
            return ({self.inside[job.name]: 1}, 0.0) if job.name in self.inside else ({}, 0.0)
        if job.name in self.cut:
            terms, const = {w: 1 for w in self.cut[job.name]}, 0.0
        else:
            terms, const = {self.keep[job.name]: -1}, 1.0
            if job.name in self.move:
                terms[self.move[job.name]] = -1
        if part == "cross" and job.name in self.inside:
            terms[self.inside[job.name]] = -1
        return terms, const


def build_decisions(s: Scenario, sc: Scope, max_moves: int, kinds: Counter[NodeKind] | None = None) -> PlanProgram:
    """keep / move for running candidates, start for waiting jobs (at most as many of each
    kind as could ever fit on `kinds`, default the cluster's nodes), in a fresh program."""
    m = PlanProgram(pulp.LpProblem("gpu_policy_plan", pulp.LpMinimize))
    movers = {j.name for j in sc.movers}
    m.victims = {j.name for j in sc.victims}
    for job in _unique(sc.victims + sc.movers):
        m.keep[job.name] = m.binary("keep", 1)
        if job.name in movers:
            m.move[job.name] = m.binary("move", 0)
            if job.name in m.victims:
                m.add(affine({m.keep[job.name]: 1, m.move[job.name]: 1}) <= 1, "once")
            else:  # not a legal victim: it stays or moves
                m.add(affine({m.keep[job.name]: 1, m.move[job.name]: 1}) == 1, "once")
    if m.move:
        # moves <= max_moves
        m.add(affine({v: 1 for v in m.move.values()}) <= max_moves, "max_moves")
    for n, victims in sc.cuts.items():
        options = [m.binary("cut", 0) for _ in victims]
        m.options[n] = options
        # at most one option per reclaim node: option k preempts its first k victims
        m.add(affine({w: 1 for w in options}) <= 1, "cut")
        for i, job in enumerate(victims):
            m.cut[job.name] = options[i:]
            m.victims.add(job.name)
    room = _room_by_shape(s, kinds or node_kinds(s))
    for job in sorted(sc.waiting, key=lambda j: (j.submitted_at, j.name)):
        mine = m.kinds.setdefault(Kind.of(job), [])
        if len(mine) < room[shape_of(job)] // job.replicas:  # more could never fit: the rest wait
            mine.append(job)
    for kind, jobs in m.kinds.items():
        if jobs:
            m.starts[kind] = m.var("starts", 0, len(jobs), "Integer", 0)
    return m


def _unique(jobs: list[Job]) -> list[Job]:
    seen: dict[str, Job] = {}
    for j in jobs:
        seen.setdefault(j.name, j)
    return list(seen.values())


def _room_by_shape(s: Scenario, kinds: Counter[NodeKind]) -> dict[Shape, int]:
    """Most replicas of each waiting shape nodes of these kinds could hold at once."""
    out: dict[Shape, int] = {}
    for job in s.jobs:
        shape = shape_of(job)
        if shape not in out:
            places = per_gpu(shape.gpus) if shape.fractional else 1
            out[shape] = sum(count * (kind.healthy * places // max(1, shape.whole_gpus))
                             for kind, count in kinds.items() if shape.fits(kind))
    return out


def build_capacity(m: PlanProgram, s: Scenario, layout: Layout, sc: Scope, limits: GpuLimits) -> None:
    """Place every started and moved replica: per detailed node and GPU, and per pool."""
    items: dict[Shape, dict] = defaultdict(dict)  # shape -> {decision: replicas}
    started: dict[Shape, dict] = defaultdict(dict)
    jobs = {j.name: j for j in s.jobs}
    for kind, var in m.starts.items():
        items[kind.shape][var] = kind.replicas
        started[kind.shape][var] = kind.replicas
    for name, var in m.move.items():
        items[shape_of(jobs[name])][var] = jobs[name].replicas
    m.started_items = started
    for job in s.jobs:
        if job.is_fractional and job.name in m.move:
            m.fraction_gpu[job.name] = layout.indices[job.name][0][0]
    for shape, demand in items.items():
        most = sum(a * var.upBound for var, a in demand.items())
        for n in sc.detailed:
            node = layout.nodes[n].node
            if not (shape.fits(node) or (m.growth is not None and m.growth.fits(shape, n))):
                continue
            if shape.fractional:
                for i in sc.fraction_gpus.get(n, ()):
                    m.frac[n, i, shape] = m.var("frac", 0, min(most, per_gpu(shape.gpus)),
                                                "Integer", 0)
            else:
                m.whole[n, shape] = m.var("whole", 0, min(most, layout.nodes[n].capacity // shape.whole_gpus),
                                          "Integer", 0)
        if not shape.fractional:
            for model, pooled in sc.pools.items():
                if any(shape.fits(layout.nodes[n].node) for n in pooled):
                    m.pool[model, shape] = m.var("pool", 0, sum(a * v.upBound for v, a in started[shape].items()), "Integer", 0)
        _not_back_in_place(m, shape, jobs, started[shape])
        placed = {v: -1 for (n, sh), v in m.whole.items() if sh == shape}
        placed.update({v: -1 for (n, i, sh), v in m.frac.items() if sh == shape})
        pooled_terms = {v: -1 for (model, sh), v in m.pool.items() if sh == shape}
        # placed replicas of shape = replicas of its started and moved jobs
        m.add(affine({**demand, **placed, **pooled_terms}) == 0, "placed")
        if pooled_terms and len(started[shape]) < len(demand):
            # moved jobs go to detailed nodes only: pooled replicas <= started replicas
            m.add(affine({**started[shape], **pooled_terms}) >= 0, "pool_starts")
    for n in sc.detailed:
        _node_capacity(m, s, layout, n, limits)
    for model, pooled in sc.pools.items():
        _pool_capacity(m, layout, model, pooled, sc.cuts)


def _not_back_in_place(m: PlanProgram, shape: Shape, jobs: dict[str, Job], started: dict) -> None:
    """A moved job of one replica does not land where it runs (on its node, or for a
    fraction on its GPU): places there go to other jobs of its shape."""
    movers = [jobs[n] for n in m.move if shape_of(jobs[n]) == shape]
    origins: dict[tuple, list[Job]] = defaultdict(list)
    for job in movers:
        if job.replicas == 1:
            origins[job.running[0], m.fraction_gpu.get(job.name)].append(job)
    for (node, gpu), mine in origins.items():
        var = m.frac.get((node, gpu, shape)) if shape.fractional else m.whole.get((node, shape))
        if var is None:
            continue
        others = {**started, **{m.move[j.name]: j.replicas for j in movers if j not in mine}}
        # places[origin] <= replicas of other started or moved jobs of the shape
        m.add(affine({var: 1, **{v: -a for v, a in others.items()}}) <= 0, "not_back")


def _node_capacity(m: PlanProgram, s: Scenario, layout: Layout, n: str, limits: GpuLimits) -> None:
    nl = layout.nodes[n]
    stays = lambda name: m.keep.get(name)  # noqa: E731  (None: a constant, it stays)
    gpu_terms: dict = defaultdict(float)
    gpu_const = 0.0
    opened_free: list[pulp.LpVariable] = []
    new_fracs: dict[int, list] = defaultdict(list)
    for (node, i, shape), var in m.frac.items():
        if node == n:
            new_fracs[i].append((shape, var))
    for i, slot in enumerate(nl.slots):
        if not nl.healthy(i):
            continue
        if slot.whole:
            if stays(slot.whole) is not None:
                gpu_terms[stays(slot.whole)] += 1
            else:
                gpu_const += 1
        var_fracs: dict[pulp.LpVariable, float] = defaultdict(float)
        fixed_frac = 0.0
        for name, f in slot.fractions:
            if stays(name) is not None:
                var_fracs[stays(name)] += f
            else:
                fixed_frac += f
        fresh = new_fracs.get(i, [])
        if not fresh and not var_fracs:
            gpu_const += 1 if slot.fractions else 0
            continue
        if fixed_frac > 0:
            gpu_const += 1  # shared by a job that stays: one used GPU
            m.shared[n, i] = ({}, 1.0)
        else:  # 1 if GPU i holds fractions after the plan (its whole holder, if any, has left)
            used = m.var("shared", 0, 1, "Binary", 1 if slot.fractions else 0)
            m.shared[n, i] = ({used: 1}, 0.0)
            gpu_terms[used] += 1
            if slot.free:
                opened_free.append(used)
            for keep in var_fracs:
                # shared[n,i] >= keep[j] for each fraction j on GPU i
                m.add(affine({used: 1, keep: -1}) >= 0, "shared")
            for shape, var in fresh:
                # most * shared[n,i] >= frac[n,i,s]
                m.add(affine({used: var.upBound, var: -1}) >= 0, "shared")
            # shared[n,i] <= fractions kept + fractions placed on GPU i: shared only if used
            m.add(affine({used: 1, **{keep: -1 for keep in var_fracs}, **{var: -1 for _, var in fresh}}) <= 0,
                  "shared")
        # fractions on GPU i + its whole holder if kept <= 1
        terms: dict = defaultdict(float)
        for keep, f in var_fracs.items():
            terms[keep] += f
        for shape, var in fresh:
            terms[var] += shape.gpus
        if slot.whole and stays(slot.whole) is not None:
            terms[stays(slot.whole)] += 1
        m.add(affine(terms, fixed_frac) <= 1, "gpu")
        m.gpu_used[n, i] = (dict(terms), fixed_frac)
        _telemetry_room(m, n, i, slot, fresh, limits)
    mig.slice_rows(m, s, nl, n, stays)
    for lower, higher in zip(opened_free, opened_free[1:]):
        # free GPUs of a node are interchangeable: open them for fractions in index order
        m.add(affine({lower: 1, higher: -1}) >= 0, "order")
    for (node, shape), var in m.whole.items():
        if node == n:
            gpu_terms[var] += shape.whole_gpus
    m.node_used[n] = (dict(gpu_terms), gpu_const)
    added = m.growth.added(n) if m.growth else {}
    # whole GPUs kept + started + GPUs shared by fractions <= healthy GPUs of n (+ attached - detached)
    m.add(affine({**gpu_terms, **{v: -a for v, a in added.items()}}, gpu_const) <= len(nl.node.healthy_gpus), "cap_gpu")
    for resource in ("cpu", "memory_gib"):
        capacity = getattr(nl.node, resource)
        if capacity is None:
            continue
        terms, const = defaultdict(float), 0.0
        for job in s.jobs:
            use = (getattr(job, resource) or 0) * job.running.count(n)
            if use and stays(job.name) is not None:
                terms[stays(job.name)] += use
            else:
                const += use
        for (node, shape), var in m.whole.items():
            if node == n:
                terms[var] += getattr(shape, resource)
        for (node, i, shape), var in m.frac.items():
            if node == n:
                terms[var] += getattr(shape, resource)
        if terms:
            # CPUs (memory) of the jobs on n after the plan <= what n has
            m.add(affine(terms, const) <= capacity, f"cap_{resource}")


def _telemetry_room(m: PlanProgram, n: str, i: int, slot, fresh: list, limits: GpuLimits) -> None:
    """A GPU that is busy or short of framebuffer takes a new fraction only if every
    occupant leaves (telemetry headroom is judged on the occupants that stay), and then
    only jobs that start: a moved job would bring its load along."""
    occupants = [name for name, _ in slot.fractions] + ([slot.whole] if slot.whole else [])
    for shape, var in fresh:
        if not occupants or limits.room_for_fraction(n, i, shape.gpus):
            continue
        # frac[n,i,s] <= replicas of started jobs of shape s
        m.add(affine({var: 1, **{v: -a for v, a in m.started_items.get(shape, {}).items()}}) <= 0, "headroom")
        for name in occupants:
            if name in m.keep:
                # frac[n,i,s] <= most * (1 - keep[j])
                m.add(affine({var: 1, m.keep[name]: var.upBound}) <= var.upBound, "headroom")
            else:
                var.upBound = 0


def _pool_capacity(m: PlanProgram, layout: Layout, model: str | None, pooled: list[str],
                   cuts: dict[str, list[Job]]) -> None:
    """One row per job size: jobs of at least s GPUs, counted in units of s, fit in the
    sum over pooled nodes of floor(free / s), where a reclaim node's free GPUs grow with
    the option the plan takes there. Exact when the sizes divide each other."""
    mine = {shape: var for (mdl, shape), var in m.pool.items() if mdl == model}
    if not mine:
        return
    free = {n: len(layout.nodes[n].free_indices()) for n in pooled}
    for size in sorted({shape.whole_gpus for shape in mine}):
        terms = {var: shape.whole_gpus / size for shape, var in mine.items() if shape.whole_gpus >= size}
        for n in pooled:
            freed = free[n]
            for w, job in zip(m.options.get(n, ()), cuts.get(n, ())):
                freed += sum(1 for i in layout.indices[job.name][0] if layout.nodes[n].healthy(i))
                terms[w] = terms.get(w, 0) - (freed // size - free[n] // size)
        # sum over shapes of size >= s of (size / s) * pool[m, shape]
        #   <= sum_n floor(free_n / s) + sum over reclaim options of the blocks they add
        m.add(affine(terms) <= sum(f // size for f in free.values()), "pool_rows")


def no_room_left_for_victims(m: PlanProgram, layout: Layout, sc: Scope, limits: GpuLimits) -> None:
    """Move before preempt, judged on the state after the plan: a preempted job of one
    replica does not fit in the GPUs the plan leaves free on any detailed node (it would
    only have had to change place; the plan keeps or moves it instead). CPU and memory are
    not looked at, which only makes the rule stricter. Gangs and reclaim nodes of large
    clusters are left out (docs/policy.md, "Known approximations").

    free_after[n] <= gpus[v] - 1 + healthy[n] * (1 - preempted[v]) for a whole-GPU victim;
    for a fraction f: no free GPU, and on every GPU shared after the plan
    used_after[n,i] >= (1 - f + strict) * preempted[v]. On a composable node the free GPUs
    after count what it attaches and detaches, and, when attaching comes before preemption,
    the GPUs it could still take (`Growth.for_victims`).
    """
    for v in (j for j in sc.victims if j.replicas == 1):
        terms, const = m.preempted(v)
        shape = shape_of(v)
        for n in sc.detailed:
            nl = layout.nodes[n]
            if n not in m.node_used or not shape.fits(nl.node):
                continue
            extra, extra_const = m.growth.for_victims(n) if m.growth else ({}, 0.0)
            healthy = len(nl.node.healthy_gpus) + extra_const
            big = healthy + sum(max(0, a) * v.upBound for v, a in extra.items())
            used, used_const = m.node_used[n]
            need = 1 if shape.fractional else shape.whole_gpus
            # healthy + extra - used_after <= need - 1 + big * (1 - preempted)
            m.add(affine({**{x: -a for x, a in used.items()}, **extra, **{x: big * a for x, a in terms.items()}},
                         healthy - used_const + big * const) <= need - 1 + big, "no_room")
            if not shape.fractional:
                continue
            for i, slot in enumerate(nl.slots):
                if (n, i) not in m.shared or not limits.room_for_fraction(n, i, v.gpus):
                    continue
                gpu_terms, gpu_const = m.gpu_used.get((n, i), ({}, slot.used))
                on, on_const = m.shared[n, i]
                level = 1 - v.gpus + STRICT
                # used_after[n,i] >= level * (preempted[v] + shared[n,i] - 1)
                m.add(affine({**gpu_terms, **{x: -level * a for x, a in terms.items()},
                              **{x: -level * a for x, a in on.items()}},
                             gpu_const - level * (const + on_const - 1)) >= 0, "no_room")

