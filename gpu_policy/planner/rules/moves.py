"""Moves: a running job restarts elsewhere to make room (move before preempt is a capacity
row, `rules.fits.no_room_left_for_victims`); the moves stage picks the moves that lose the
least work, then the fewest."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulp

from gpu_policy.model import Job
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.linear import affine
from gpu_policy.planner.rules.victims import victim_costs
from gpu_policy.planner.rules.protocol import RuleBase, Stage

if TYPE_CHECKING:
    from gpu_policy.planner.program import PlanProgram
    from gpu_policy.planner.rules.context import PlanContext


def moves_stage(m: PlanProgram, movers: list[Job], cfg: PlannerConfig) -> pulp.LpAffineExpression:
    """The moves that lose the least work, then the fewest (costs as for victims).
    `movers`: the scope's, in the scenario's order."""
    cost = victim_costs([j for j in movers if j.name in m.decisions.move], cfg)
    return affine({m.decisions.move[name]: c for name, c in cost.items()})


class Moves(RuleBase):
    """The moves stage, where the scope has movers."""

    name = "moves"

    def stages(self, ctx: PlanContext) -> list[Stage]:
        if not ctx.m.decisions.move:
            return []
        return [Stage("moves", lambda: [("moves", moves_stage(ctx.m, ctx.scope.movers, ctx.config))])]


RULE = Moves()
