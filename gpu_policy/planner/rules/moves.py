"""Moves: a running job restarts elsewhere to make room (move before preempt is a capacity
row, `rules.move_first.no_room_left_for_victims`); the moves stage picks the moves that lose the
least work, then the fewest."""

from __future__ import annotations

from collections.abc import Mapping

import pulp

from gpu_policy.model import Job
from gpu_policy.model.plan import Placement
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.rule import Rule, Stage
from gpu_policy.planner.rules.victims import victim_costs


def moves_stage(m: PlanProgram, movers: list[Job], cfg: PlannerConfig, reclaim_wait_s: float) -> pulp.LpAffineExpression:
    """The moves that lose the least work, then the fewest (costs as for victims).
    `movers`: the scope's, in the scenario's order."""
    cost = victim_costs([j for j in movers if j.name in m.decisions.move], cfg, reclaim_wait_s)
    return affine({m.decisions.move[name]: c for name, c in cost.items()})


class Moves(Rule):
    """The moves stage, where the scope has movers, and why a job moves."""

    name = "moves"
    codes = {"MovedToDefragment": "stopped and restarted on other nodes so that waiting jobs fit"}
    #: Where its stage ranks: after the starts and GPUs attached, before GPUs detached.
    MOVES = 80

    def stages(self, ctx: PlanContext) -> list[Stage]:
        if not ctx.m.decisions.move:
            return []
        return [Stage(self.MOVES, lambda: [("moves", moves_stage(ctx.m, ctx.scope.movers, ctx.config,
                                                                   ctx.scenario.policy.reclaim_wait_s))])]

    def why_move(self, job: Job, to: list[Placement], started: Mapping[str, list[Placement]]) -> Reason | None:
        """The jobs its old GPUs let start."""
        sources = sorted(set(job.running))
        names = sorted(name for name, replicas in started.items() if any(p.node in sources for p in replicas))
        gain = f"so that {', '.join(names)} fit{'s' if len(names) == 1 else ''} there" if names else "to make room"
        where = ", ".join(sorted({p.node for p in to}))
        return self.reason("MovedToDefragment", f"moved from {', '.join(sources)} to {where} {gain}; restarts from "
                                                "its checkpoint")
