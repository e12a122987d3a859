"""The objectives after fair share, each a stage solved after the ones before it:

  preemption_<tier>  preemptions for other queues losing the least work, then the fewest
                     (victim_costs): one stage per victim tier, highest priority first (so
                     lower priorities go first), idle jobs of queues above their share last
  priority_p<P>      (inside.priority_levels) inside a queue, higher priority first
  preemption_inside_<tier>  the preemptions inside a queue that needs, costed the same way
  starts             the most GPUs of waiting work started; ties to the smallest relative
                     share, then higher priority, then older (rules.start_order)
  moves              the moves losing the least work, then the fewest
  packing            the fewest empty nodes opened, then the least expected fragmentation
"""

from __future__ import annotations

from collections import defaultdict

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.packing.fragmentation import WorkloadMix
from gpu_policy.planner import rules
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.layout import Layout
from gpu_policy.planner.packing import placement_costs
from gpu_policy.planner.program import PlanProgram, affine
from gpu_policy.planner.scope import Standing
from gpu_policy.planner.telemetry import GpuLimits


def victim_costs(victims: list[Job], cfg: PlannerConfig) -> dict[str, float]:
    """Cost of preempting (or moving) each victim: the work it loses (rules.victim_cost) in
    whole GPU-minutes, so that a plan's victims lose the least work in all, and plans losing
    the same work tie; plus less than one GPU-minute over all victims that prefers fewer
    victims, then the most recently submitted."""
    if not victims:
        return {}
    n = len(victims)
    recent = {j.name: r for r, j in enumerate(sorted(victims, key=lambda j: (-j.submitted_at, j.name)))}
    minutes = {j.name: rules.victim_cost(j, cfg.default_checkpoint_age_s).minutes for j in victims}
    return {j.name: minutes[j.name] + (1 + recent[j.name] / n) / (2 * n + 2) for j in victims}


def preemption_stages(m: PlanProgram, s: Scenario, st: Standing, cfg: PlannerConfig, limits: GpuLimits,
                      part: str) -> list[tuple[str, pulp.LpAffineExpression]]:
    """`part`: "cross" (victims given to other queues: solved before priority inside a
    queue) or "inside" (victims of a queue's own higher-priority work: after it)."""
    victims = [j for j in s.jobs if j.name in m.victims and (part == "cross" or j.name in m.inside)]
    cost = victim_costs(victims, cfg)

    def tier(job: Job) -> tuple[int, int]:
        idle = rules.idle_victim(job, limits.idle_jobs, st.held, st.shares.fair)
        return rules.victim_cost(job, cfg.default_checkpoint_age_s, idle).tier

    stages = []
    for key in sorted({tier(j) for j in victims}, reverse=True):
        terms: dict = defaultdict(float)
        const = 0.0
        for j in victims:
            if tier(j) == key:
                t, c = m.preempted(j, part)
                for var, a in t.items():
                    terms[var] += a * cost[j.name]
                const += c * cost[j.name]
        label = "idle" if key[0] == 0 else f"p{key[1]}"
        stages.append((f"preemption_{label}" if part == "cross" else f"preemption_inside_{label}",
                       affine(terms, const)))
    return stages


def starts_stage(m: PlanProgram, ordered: list[Job]) -> pulp.LpAffineExpression:
    """Maximise GPUs started; the rank in start order breaks ties, worth less in total than
    the smallest job. The k-th job of a kind is worth its rank's value: kind k starting n
    jobs earns its first n values, one continuous segment per job (starts[k] = sum of its
    segments; their values fall, so the best fill first)."""
    rank = {j.name: r for r, j in enumerate(ordered)}
    jobs = [j for mine in m.kinds.values() for j in mine]
    n = len(jobs)
    tie = 1e-3 * min(j.total_gpus for j in jobs) / (n + 1)
    objective = {}
    for kind, var in m.starts.items():
        segments = {}
        for job in m.kinds[kind]:
            segment = m.var("rank", 0, 1)
            segments[segment] = 1
            objective[segment] = -(job.total_gpus + tie * (n - rank[job.name]) / n)
        # starts[k] = sum of its segments
        m.add(affine({**segments, var: -1}) == 0, "segments")
    return affine(objective)


def moves_stage(m: PlanProgram, s: Scenario, cfg: PlannerConfig) -> pulp.LpAffineExpression:
    """The moves that lose the least work, then the fewest (costs as for victims)."""
    cost = victim_costs([j for j in s.jobs if j.name in m.move], cfg)
    return affine({m.move[name]: c for name, c in cost.items()})


def packing_stage(m: PlanProgram, s: Scenario, layout: Layout, mix: WorkloadMix) -> pulp.LpAffineExpression:
    """Open as few empty nodes as possible; then as few free GPUs for fractions (fractions
    share a GPU when they can: the price below sees one placement at a time, so it cannot
    tell two fractions sharing a GPU from two on two GPUs); then the placements that grow
    the expected fragmentation least (`gpu_policy.planner.packing`). Each term weighs less
    than one unit of the one before."""
    options = [(shape.representative(), n, None) for n, shape in m.whole]
    options += [(shape.representative(), n, i) for n, i, shape in m.frac]
    keys = list(m.whole.values()) + list(m.frac.values())
    costs = placement_costs(s, layout, mix, options)
    opened_gpus = [terms for (n, i), (terms, _) in m.shared.items() if layout.nodes[n].slots[i].free]
    gpu_weight = 1 / (len(opened_gpus) + 2)
    scale = (sum(abs(c) * (var.upBound or 1) for c, var in zip(costs, keys)) + 1) / gpu_weight
    objective: dict = {var: cost / scale for var, cost in zip(keys, costs)}
    for terms in opened_gpus:
        for var in terms:
            objective[var] = objective.get(var, 0) + gpu_weight
    used_on: dict[str, dict] = defaultdict(dict)
    for (n, shape), var in m.whole.items():
        used_on[n][var] = shape.whole_gpus
    for (n, _i, shape), var in m.frac.items():
        used_on[n][var] = used_on[n].get(var, 0) + shape.gpus
    for n, terms in used_on.items():
        nl = layout.nodes[n]
        if all(slot.free for slot in nl.slots):
            opened = m.binary("opened", 0)
            # work placed on n <= capacity[n] * opened[n]
            m.add(affine({**terms, opened: -max(1, nl.capacity)}) <= 0, "opened")
            objective[opened] = 1
    return affine(objective)
