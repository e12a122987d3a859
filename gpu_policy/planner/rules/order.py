"""The rules of the program in the order their rows are added (`rules.protocol.build`;
their stages follow `rules.protocol.STAGE_ORDER`, whatever this order). Composition comes
first (the capacity rows count the GPUs composable nodes gain or lose), then what fits,
then the queue rules: limits, claims (whose variables reclaim reads), reclaim (which adds
the inside victims' variables), priority inside a queue; victims, moves and packing have
stages only."""

from __future__ import annotations

from gpu_policy.planner.rules import claims, fits, inside, limits, moves, packing, reclaim, victims
from gpu_policy.planner.rules.protocol import Rule

#: The rules after composition, which is one object per plan (`rules.composition.Composer`).
RULES: tuple[Rule, ...] = (fits.RULE, limits.RULE, claims.RULE, reclaim.RULE, inside.RULE, victims.RULE,
                           moves.RULE, packing.RULE)


def in_order(composition: Rule) -> list[Rule]:
    """Every rule of one plan's program, in order."""
    return [composition, *RULES]
