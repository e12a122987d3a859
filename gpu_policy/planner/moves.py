"""Consolidation moves: restart a few running jobs elsewhere so that a waiting job
that fits nowhere gets a node.

Runs after the main program, on the cluster as the plan leaves it, and uses only
GPUs that are free there: a move takes nothing from any queue. A plan that
preempts considers no moves: the GPUs it frees belong to the queue they were
reclaimed for. A job may move when it is preemptible, runs one replica of whole
GPUs, and was not started by this plan. A waiting whole-GPU job may start this
way when its queue stays within its limit (and its non-preemptible work within
its deserved quota): the rules for borrowing free GPUs.

Two stages, as in the main program: start the most waiting work (queues below
their fair share first, then older and higher-priority jobs), then move the
fewest jobs losing the least work; at most `max_moves`. On large clusters each
waiting job considers the `candidate_nodes_per_job` nodes that need the fewest
GPUs moved out, and each movable job as many best-fitting destinations.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.plan import Placement
from gpu_policy.planner.candidates import victim_costs
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.layout import Layout, layout_after, place
from gpu_policy.planner.program import Program, affine
from gpu_policy.planner.solve import solve_stages


@dataclass
class Consolidation:
    moved: dict[str, Placement]              # job -> where it runs now
    started: dict[str, list[Placement]]      # job -> its replicas
    layout: Layout                           # the cluster after moves and starts
    stages: list[dict]


def consolidate(s: Scenario, after: Layout, waiting: list[Job], running: set[str], held: dict[str, float],
                fair: dict[str, int], spare: dict[str, dict[str, float]], started: set[str],
                cfg: PlannerConfig) -> Consolidation | None:
    """Moves that let waiting jobs start, or None when none would. `running`: jobs
    that run after the plan; `held`: GPUs per queue after it; `fair`: fair shares;
    `spare`: free CPU and memory per node after it; `started`: jobs the plan starts.
    Call it only for plans that preempt nothing."""
    if cfg.max_moves == 0:
        return None
    free = {n: len(nl.free_indices()) for n, nl in after.nodes.items()}
    blocked = [p for p in waiting if _may_borrow(p, s, held) and _needs_room(p, s, free)]
    if not blocked:
        return None
    jobs = {j.name: j for j in s.jobs}
    movable_on: dict[str, list[Job]] = defaultdict(list)
    for j in s.jobs:
        if j.name in running and j.name not in started and _may_move(j):
            movable_on[j.running[0]].append(j)
    few = len(s.nodes) <= cfg.exact_nodes
    m = Program(pulp.LpProblem("consolidation", pulp.LpMinimize))
    sources: set[str] = set()
    for p in blocked:
        spots = _spots(p, s, free, movable_on, None if few else cfg.candidate_nodes_per_job)
        sources |= {n for n in spots if free[n] < p.gpus}
        m.start[p.name] = pulp.LpVariable(f"start_{p.name}", cat="Binary")
        for n in spots:
            m.x[p.name, n] = pulp.LpVariable(f"x_{p.name}_{n}", 0, p.replicas, cat="Integer")
        m.prob += affine({**{m.x[p.name, n]: 1 for n in spots}, m.start[p.name]: -p.replicas}) == 0, f"gang_{p.name}"
    move: dict[tuple[str, str], pulp.LpVariable] = {}
    moved: dict[str, pulp.LpVariable] = {}
    for src in sorted(sources):
        for j in movable_on[src]:
            fits = sorted((free[n.name], n.name) for n in s.nodes
                          if n.name != src and j.fits_model(n) and free[n.name] >= j.gpus)
            targets = [n for _, n in (fits if few else fits[:cfg.candidate_nodes_per_job])]
            targets += [n for n in sorted(sources) if n != src and n not in targets]
            if not targets:
                continue
            for n in targets:
                move[j.name, n] = pulp.LpVariable(f"move_{j.name}_{n}", cat="Binary")
            moved[j.name] = pulp.LpVariable(f"moved_{j.name}", cat="Binary")
            m.prob += affine({**{move[j.name, n]: 1 for n in targets}, moved[j.name]: -1}) == 0, f"once_{j.name}"
    if not moved:
        return None
    _capacity(m, s, free, spare, jobs, move, moved)
    m.prob += affine({v: 1 for v in moved.values()}) <= cfg.max_moves, "max_moves"
    below = {p.name: held[p.queue] < fair[p.queue] for p in blocked}
    order = sorted(blocked, key=lambda p: (not below[p.name], -p.priority, p.submitted_at, p.name))
    claim = sum(p.total_gpus for p in blocked) + 1  # a queue below its fair share comes first
    m.stages.append(("moved_starts", affine({
        m.start[p.name]: -(p.total_gpus + claim * below[p.name] + 1e-3 * (len(order) - r) / len(order))
        for r, p in enumerate(order)})))
    lost = victim_costs([jobs[name] for name in moved], cfg)
    m.stages.append(("moves", affine({var: 1 + lost[name] for name, var in moved.items()})))
    report = solve_stages(m, cfg)
    started = [p for p in order if round(m.start[p.name].varValue or 0) == 1]
    if not started:
        return None
    goes = {j: n for (j, n), var in move.items() if round(var.varValue or 0) == 1}
    layout = layout_after(after, set(goes))
    out = Consolidation({}, {}, layout, report.stages)
    for j, n in sorted(goes.items()):
        out.moved[j] = Placement(n, jobs[j].gpus, place(layout, jobs[j], n))
    for p in started:
        out.started[p.name] = [Placement(n, p.gpus, place(layout, p, n))
                               for (name, n), var in sorted(m.x.items()) if name == p.name
                               for _ in range(round(var.varValue or 0))]
    return out


def _may_move(j: Job) -> bool:
    """Preemptible, one replica of whole GPUs: it can restart elsewhere from its checkpoint."""
    return j.is_preemptible and j.replicas == 1 and not j.is_fractional


def _may_borrow(p: Job, s: Scenario, held: dict[str, float]) -> bool:
    """Starting p on free GPUs keeps every queue above it within its limit, and its
    queue's non-preemptible work within deserved."""
    if p.is_fractional:
        return False
    name: str | None = p.queue
    while name is not None:
        q = s.queue(name)
        if q.limit is not None and held[name] + p.total_gpus > q.limit + 1e-9:
            return False
        name = q.parent
    if not p.is_preemptible:
        pinned = sum(j.total_gpus for j in s.jobs if j.queue == p.queue and j.is_running and not j.is_preemptible)
        return pinned + p.total_gpus <= s.queue(p.queue).deserved + 1e-9
    return True


def _needs_room(p: Job, s: Scenario, free: dict[str, int]) -> bool:
    """Enough GPUs are free on nodes of its model, but not in blocks big enough."""
    ok = [n for n in s.nodes if p.fits_model(n)]
    return sum(free[n.name] for n in ok) >= p.total_gpus > sum(free[n.name] // int(p.gpus) for n in ok) * p.gpus


def _spots(p: Job, s: Scenario, free: dict[str, int], movable_on: dict[str, list[Job]], k: int | None) -> list[str]:
    """Nodes a replica of p could use: those with room now, and those that would have
    room after moving jobs out, fewest GPUs to move first."""
    ranked = []
    for n in s.nodes:
        if not p.fits_model(n) or len(n.healthy_gpus) < p.gpus:
            continue
        could = free[n.name] + sum(j.gpus for j in movable_on[n.name])
        if could >= p.gpus:
            ranked.append((max(0, p.gpus - free[n.name]), n.name))
    ranked.sort()
    return sorted(n for _, n in (ranked if k is None else ranked[:k + p.replicas - 1]))


def _capacity(m: Program, s: Scenario, free: dict[str, int], spare: dict[str, dict[str, float]],
              jobs: dict[str, Job], move: dict, moved: dict) -> None:
    """Per node: what comes in <= what is free + what moves out; GPUs, and CPU and
    memory where the node declares them."""
    incoming: dict[str, list[tuple[Job, pulp.LpVariable]]] = defaultdict(list)
    for (p, n), var in m.x.items():
        incoming[n].append((jobs[p], var))
    for (j, n), var in move.items():
        incoming[n].append((jobs[j], var))
    leaving: dict[str, list[tuple[Job, pulp.LpVariable]]] = defaultdict(list)
    for name, var in moved.items():
        leaving[jobs[name].running[0]].append((jobs[name], var))
    for n in sorted(incoming):
        for resource, room in [("gpus", free[n])] + sorted(spare[n].items()):
            t: dict = defaultdict(float)
            for job, var in incoming[n]:
                t[var] += getattr(job, resource) or 0
            for job, var in leaving[n]:
                t[var] -= getattr(job, resource) or 0
            m.prob += affine(t) <= room, f"cap_{resource}_{n}"
