"""From the program's solution to concrete GPUs: which job, which replica, which indices.

The program decides per shape how many replicas go to each detailed node, GPU and pool;
jobs of one shape are interchangeable, so any assignment of them to those places is the
program's plan. Moved jobs take places off their old nodes where the plan has them (a
job whose places all fall back where it runs is simply kept). Replicas on pooled nodes
are placed by `gpu_policy.planner.core.packing.pack`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gpu_policy.model import Job, Scenario
from gpu_policy.packing.fragmentation import WorkloadMix
from gpu_policy.model.plan import Placement
from gpu_policy.model.layout import Layout, fits_on_gpu, layout_after, place, place_at
from gpu_policy.planner.core.packing import pack
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.scope import Scope
from gpu_policy.planner.core.shapes import Shape


@dataclass
class Realized:
    preempted: set[str]
    moved: dict[str, list[Placement]]
    started: dict[str, list[Placement]]
    layout: Layout                                      # the cluster after the plan
    unplaced: set[str] = field(default_factory=set)     # chosen to start, but no room found on pooled nodes


def _on(var) -> int:
    return round(var.varValue or 0)


#: Where the program puts one replica: (node, None) for whole GPUs, (node, GPU) for a
#: fraction, ("pool", GPU model) for a pooled node.
Spot = tuple


def realize(m: PlanProgram, s: Scenario, layout: Layout, sc: Scope, order: list[Job],
            mix: WorkloadMix | None, prefer: Callable[[Layout], Mapping[str, float] | None] = lambda after: None
            ) -> Realized:
    """`order`: waiting jobs in start order (they take places in that order); `prefer`: what
    packing pooled replicas prefers first on the cluster as the program leaves it (the rules'
    `node_order`)."""
    moving = _moving(m, sc)
    preempted = {n for n, v in m.decisions.keep.items() if not _on(v) and not (n in m.decisions.move and _on(m.decisions.move[n]))}
    preempted |= {n for n, options in m.decisions.cut.items() if any(_on(w) for w in options)}
    starting = _starting(m, order)
    jobs = {j.name: j for j in moving + starting}  # the jobs that take places
    assigned = _spots(m, layout, sc, moving, starting)
    after = layout_after(layout, preempted | {j.name for j in moving})
    out = Realized(preempted, {}, {}, after)
    placed = _place_detailed(m, jobs, assigned, layout, after)
    _place_pooled(s, sc, mix, jobs, assigned, placed, out, prefer)
    for name, replicas in placed.items():
        (out.moved if name in m.decisions.move else out.started)[name] = replicas
    return out


def _moving(m: PlanProgram, sc: Scope) -> list[Job]:
    """The running jobs the program moves, in the program's order (that of `m.decisions.move`)."""
    names = [n for n, v in m.decisions.move.items() if _on(v)]
    if not names:
        return []
    movers = {j.name: j for j in sc.movers}
    return [movers[n] for n in names]


def _starting(m: PlanProgram, order: list[Job]) -> list[Job]:
    """The waiting jobs the program starts, in `order`: of each kind, as many as it says, oldest first."""
    chosen = {j.name for kind, var in m.decisions.starts.items() for j in m.decisions.kinds[kind][:_on(var)]}
    return [j for j in order if j.name in chosen]


def _spots(m: PlanProgram, layout: Layout, sc: Scope, moving: list[Job], starting: list[Job]) -> dict[str, list[Spot]]:
    """Each moved or started job's spot per replica. The program's places of a shape go to
    movers first, each replica to a detailed node off where it runs if one is left, then to
    the starting jobs in order, in the program's (cluster) order."""
    places: dict[Shape, list[Spot]] = defaultdict(list)
    for (n, shape), var in m.placement.whole.items():
        places[shape] += [(n, None)] * _on(var)
    for (n, i, shape), var in m.placement.frac.items():
        places[shape] += [(n, i)] * _on(var)
    for (model, shape), var in m.placement.pool.items():
        places[shape] += [("pool", model)] * _on(var)
    assigned: dict[str, list[Spot]] = {}
    for job in moving:
        mine = places[sc.shape(job)]
        assigned[job.name] = []
        for _ in range(job.replicas):
            detailed = [p for p in mine if p[0] != "pool"]
            pick = next((p for p in detailed if not _where_it_runs(job, p, layout)), detailed[0])
            mine.remove(pick)
            assigned[job.name].append(pick)
    for job in starting:
        mine = places[sc.shape(job)]
        assigned[job.name] = [mine.pop(0) for _ in range(job.replicas)]
    return assigned


def _place_detailed(m: PlanProgram, jobs: dict[str, Job], assigned: dict[str, list[Spot]], layout: Layout,
                    after: Layout) -> dict[str, list[Placement]]:
    """Put the replicas with spots on detailed nodes onto `after`: fractions on their GPUs
    first, then whole GPUs by lowest index. A moved job whose spots are all where it runs,
    on GPUs still free, stays (and is not in the result)."""
    placed: dict[str, list[Placement]] = defaultdict(list)
    for fractional in (True, False):
        for name, spots in assigned.items():
            job = jobs[name]
            if job.is_fractional != fractional or (name in m.decisions.move and _back_in_place(job, spots, layout, after)):
                continue
            for node, gpu in spots:
                if node != "pool":
                    placed[name].append(Placement(node, job.gpus, place(after, job, node, gpu)))
    return placed


def _place_pooled(s: Scenario, sc: Scope, mix: WorkloadMix | None, jobs: dict[str, Job],
                  assigned: dict[str, list[Spot]], placed: dict[str, list[Placement]], out: Realized,
                  prefer: Callable[[Layout], Mapping[str, float] | None]) -> None:
    """Pack the replicas with spots on pools (`pack`) onto `out.layout`, adding them to
    `placed`; a job with a replica that finds no room is unplaced, all its replicas taken off."""
    pooled = [(jobs[name], [p[1] for p in spots if p[0] == "pool"]) for name, spots in assigned.items()]
    pooled = [(job, models) for job, models in pooled if models]
    if not pooled:
        return
    after = out.layout
    nodes = {model: list(sc.pools.get(model, [])) for _, models in pooled for model in models}
    for name, replicas in pack(s, after, pooled, nodes, mix, prefer=prefer(after)).items():
        if replicas is not None:
            placed[name].extend(replicas)
            continue
        out.unplaced.add(name)
        for p in placed.pop(name, []):  # free what its other replicas took
            after.release(p.node, name)
        after.indices.pop(name, None)
        after.hosts.pop(name, None)


def _back_in_place(job: Job, spots: list[tuple], layout: Layout, after: Layout) -> bool:
    """A moved job whose places all fall where it runs, on GPUs nothing took meanwhile, is
    put back on its very GPUs and simply kept."""
    if sorted(p[0] for p in spots) != sorted(job.running) or not all(_where_it_runs(job, p, layout) for p in spots):
        return False
    if any(not after.nodes[n].slots[i].free and not job.is_fractional
           for n, ix in zip(job.running, layout.indices[job.name]) for i in ix):
        return False
    if job.is_fractional and any(not fits_on_gpu(after.nodes[n].slots[ix[0]].used, job.gpus)
                                 for n, ix in zip(job.running, layout.indices[job.name])):
        return False
    for node, ix in zip(job.running, layout.indices[job.name]):
        place_at(after, job, node, ix)
    return True


def _where_it_runs(job: Job, place_: tuple, layout: Layout) -> bool:
    node, gpu = place_
    if node not in job.running:
        return False
    if gpu is None:
        return True
    return any(gpu in ix for n, ix in zip(job.running, layout.indices[job.name]) if n == node)
