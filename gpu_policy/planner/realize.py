"""From the program's solution to concrete GPUs: which job, which replica, which indices.

The program decides per shape how many replicas go to each detailed node, GPU and pool;
jobs of one shape are interchangeable, so any assignment of them to those places is the
program's plan. Moved jobs take places off their old nodes where the plan has them (a
job whose places all fall back where it runs is simply kept). Replicas on pooled nodes
are placed by `gpu_policy.planner.packing.pack`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpu_policy.model import Job, Scenario
from gpu_policy.packing.fragmentation import WorkloadMix
from gpu_policy.plan import Placement
from gpu_policy.planner.layout import Layout, layout_after, place, place_at
from gpu_policy.planner.packing import pack
from gpu_policy.planner.program import PlanProgram
from gpu_policy.planner.rules.fits import fits_on_gpu
from gpu_policy.planner.scope import Scope
from gpu_policy.planner.shapes import Shape, shape_of


@dataclass
class Outcome:
    preempted: set[str]
    moved: dict[str, list[Placement]]
    started: dict[str, list[Placement]]
    layout: Layout                                      # the cluster after the plan
    unplaced: set[str] = field(default_factory=set)     # chosen to start, but no room found on pooled nodes


def _on(var) -> int:
    return round(var.varValue or 0)


def realize(m: PlanProgram, s: Scenario, layout: Layout, sc: Scope, order: list[Job],
            mix: WorkloadMix | None) -> Outcome:
    """`order`: waiting jobs in start order (they take places in that order)."""
    jobs = {j.name: j for j in s.jobs}
    moving = [jobs[n] for n, v in m.move.items() if _on(v)]
    preempted = {n for n, v in m.keep.items() if not _on(v) and not (n in m.move and _on(m.move[n]))}
    preempted |= {n for n, options in m.cut.items() if any(_on(w) for w in options)}
    chosen = {j.name for kind, var in m.starts.items() for j in m.kinds[kind][:_on(var)]}
    starting = [j for j in order if j.name in chosen]
    places: dict[Shape, list[tuple]] = defaultdict(list)  # shape -> (node, gpu) or ("pool", model)
    for (n, shape), var in m.whole.items():  # in the program's (cluster) order
        places[shape] += [(n, None)] * _on(var)
    for (n, i, shape), var in m.frac.items():
        places[shape] += [(n, i)] * _on(var)
    for (model, shape), var in m.pool.items():
        places[shape] += [("pool", model)] * _on(var)

    assigned: dict[str, list[tuple]] = {}
    for job in moving:  # movers first, to places off where they run
        mine = places[shape_of(job)]
        chosen = []
        for _ in range(job.replicas):
            pick = next((p for p in mine if p[0] != "pool" and not _where_it_runs(job, p, layout)), None)
            pick = pick or next(p for p in mine if p[0] != "pool")
            mine.remove(pick)
            chosen.append(pick)
        assigned[job.name] = chosen
    for job in starting:
        mine = places[shape_of(job)]
        assigned[job.name] = [mine.pop(0) for _ in range(job.replicas)]

    after = layout_after(layout, preempted | {j.name for j in moving})
    out = Outcome(preempted, {}, {}, after)
    placed: dict[str, list[Placement]] = defaultdict(list)
    for fractional in (True, False):  # fractions on their GPUs first, then whole GPUs by lowest index
        for name, spots in assigned.items():
            job = jobs[name]
            if job.is_fractional != fractional:
                continue
            if name in m.move and _back_in_place(job, spots, layout, after):
                continue  # every place is where it runs, and its GPUs are still free: it stays
            for node, gpu in spots:
                if node != "pool":
                    placed[name].append(Placement(node, job.gpus, place(after, job, node, gpu)))
    pooled = [(jobs[name], [p[1] for p in spots if p[0] == "pool"]) for name, spots in assigned.items()]
    pooled = [(job, models) for job, models in pooled if models]
    if pooled:
        nodes = {model: list(sc.pools.get(model, [])) for _, models in pooled for model in models}
        for name, replicas in pack(s, after, pooled, nodes, mix).items():
            if replicas is None:
                out.unplaced.add(name)
                for p in placed.pop(name, []):  # free what its other replicas took
                    after.release(p.node, name)
                after.indices.pop(name, None)
                after.hosts.pop(name, None)
            else:
                placed[name].extend(replicas)
    for name, replicas in placed.items():
        (out.moved if name in m.move else out.started)[name] = replicas
    return out


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
