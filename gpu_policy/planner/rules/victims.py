"""Which victim goes first: the one order every part of the planner uses, and the program's
preemption stages (`preemption_stages`: one per victim tier, each costing victims by
`gpu_policy.planner.objectives.victim_costs`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.linear import affine
from gpu_policy.planner.objectives import victim_costs
from gpu_policy.planner.rules.protocol import RuleBase, Stage

if TYPE_CHECKING:
    from gpu_policy.planner.program import PlanProgram
    from gpu_policy.planner.rules.context import PlanContext
    from gpu_policy.planner.scope import Standing
    from gpu_policy.planner.telemetry import GpuLimits


def lost_work(job: Job, default_age_s: float) -> float:
    """GPU-seconds since the job's last checkpoint: what preempting or moving it loses (an
    unknown age counts as `default_age_s`)."""
    age = job.checkpoint_age_s if job.checkpoint_age_s is not None else default_age_s
    return job.total_gpus * age


def idle_victim(job: Job, idle_jobs: Mapping[str, float], held: Mapping[str, float],
                fair: Mapping[str, float]) -> bool:
    """An idle job (DCGM telemetry) of a queue above its fair share: the first victim."""
    return job.name in idle_jobs and held[job.queue] > fair[job.queue]


def victim_tier(job: Job, idle: bool) -> tuple[int, int]:
    """Which victims go first, before any cost: idle jobs of queues above their share, then
    the lowest priority. The program has one preemption stage per tier (highest first, so
    the lowest tier goes first); the greedy scope ranks candidate nodes by the highest tier
    their victims take."""
    return (0, 0) if idle else (1, job.priority)


def victim_order_key(job: Job, lost_work: float, idle: bool = False) -> tuple:
    """Among valid victims: the lowest tier (`victim_tier`), then the least lost work, then
    the most recently submitted."""
    return (*victim_tier(job, idle), lost_work, -job.submitted_at, job.name)


def tier_of(victim: Job, standing: Standing, limits: GpuLimits) -> tuple[int, int]:
    """The victim's tier (`victim_tier`): idle (DCGM telemetry) in a queue above its fair
    share, or its priority."""
    return victim_tier(victim, idle_victim(victim, limits.idle_jobs, standing.held, standing.shares.fair))


def preemption_stages(m: PlanProgram, s: Scenario, st: Standing, cfg: PlannerConfig, limits: GpuLimits,
                      part: str) -> list[tuple[str, pulp.LpAffineExpression]]:
    """`part`: "cross" (victims given to other queues: solved before priority inside a
    queue) or "inside" (victims of a queue's own higher-priority work: after it)."""
    victims = [j for j in s.jobs if j.name in m.decisions.victims and (part == "cross" or j.name in m.flows.inside)]
    cost = victim_costs(victims, cfg)
    stages = []
    for key in sorted({tier_of(j, st, limits) for j in victims}, reverse=True):
        terms: dict = defaultdict(float)
        const = 0.0
        for j in victims:
            if tier_of(j, st, limits) == key:
                t, c = m.preempted(j, part)
                for var, a in t.items():
                    terms[var] += a * cost[j.name]
                const += c * cost[j.name]
        label = "idle" if key[0] == 0 else f"p{key[1]}"
        stages.append((f"preemption_{label}" if part == "cross" else f"preemption_inside_{label}",
                       affine(terms, const)))
    return stages


class Victims(RuleBase):
    """Which victim goes first: the preemption stages, for other queues before priority
    inside a queue, and inside a queue after it."""

    name = "victims"

    def stages(self, ctx: PlanContext) -> list[Stage]:
        def part(which: str):
            return lambda: preemption_stages(ctx.m, ctx.scenario, ctx.standing, ctx.config, ctx.limits, which)
        return [Stage("preemption", part("cross")), Stage("preemption_inside", part("inside"))]

    def scope_hint(self, victim: Job, standing: Standing, limits: GpuLimits) -> tuple | None:
        """The victim's tier, as the preemption stages order victims: idle jobs of queues
        above their share first, then the lowest priority."""
        return tier_of(victim, standing, limits)


RULE = Victims()
