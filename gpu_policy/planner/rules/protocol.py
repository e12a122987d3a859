"""The shape of a rule in the integer program, and the one order of its objective stages.

A `Rule` adds its variables and constraint rows (`rows`), declares its objective stages
(`stages`, each tagged with a family of `STAGE_ORDER`). Beside its `RULE`, a rule module
holds the rule's predicates and its reasons (`why_wait`, `why_preempt`: the reason writer,
`gpu_policy.planner.reasons`, asks them in the order of its `WAIT_RULES` and
`PREEMPT_RULES`); the greedy scope ranks victims by the victims rule's own cost
(`rules.victim_cost`). The program builder (`build`) calls every rule's rows in the order of
the rules (`rules.order.in_order`), then builds the stages family by family in `STAGE_ORDER`: the order of the objectives is
declared here, once, and no rule needs to know where another's stages go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

import pulp

if TYPE_CHECKING:
    from gpu_policy.planner.rules.context import PlanContext

#: The objectives in strict order (docs/policy.md, "The program"): a queue's guarantee, then
#: fair share (one stage per depth of the queue tree), preemptions for other queues (one
#: stage per victim tier), priority inside a queue (one stage per priority), preemptions
#: inside a queue, starts, GPUs attached, moves, GPUs detached, packing.
STAGE_ORDER = ("guarantees", "fair_share", "preemption", "priority", "preemption_inside", "starts", "attach",
               "moves", "detach", "packing")

Objective = tuple[str, pulp.LpAffineExpression]  # a stage's name in the report, and what it minimises


@dataclass(frozen=True)
class Stage:
    """Objective stages of one family, built when their turn comes (building one may add
    variables and rows, which the stages before it must not see)."""

    family: str
    build: Callable[[], list[Objective]]

    def __post_init__(self):
        if self.family not in STAGE_ORDER:
            raise ValueError(f"stage family {self.family!r} is not in STAGE_ORDER")


class Rule(Protocol):
    """One rule of the policy as the program sees it."""

    name: str

    def rows(self, ctx: PlanContext) -> None:
        """Add the rule's variables and constraint rows to `ctx.m`."""

    def stages(self, ctx: PlanContext) -> list[Stage]:
        """The rule's objective stages (none: a rule of rows only)."""


class RuleBase:
    """A rule with no rows and no stages: each rule overrides what it has."""

    name = "rule"

    def rows(self, ctx: PlanContext) -> None:
        return None

    def stages(self, ctx: PlanContext) -> list[Stage]:
        return []


def build(ctx: PlanContext, rules: list[Rule]) -> None:
    """Every rule's rows in the order of `rules`, then the stages in `STAGE_ORDER`; stages
    with nothing to decide are left out."""
    for rule in rules:
        rule.rows(ctx)
    declared = [stage for rule in rules for stage in rule.stages(ctx)]
    objectives = [objective for family in STAGE_ORDER for stage in declared if stage.family == family
                  for objective in stage.build()]
    ctx.m.stages = [(name, expr) for name, expr in objectives
                    if isinstance(expr, pulp.LpAffineExpression) and len(expr)]
