"""Packing: where started and moved replicas go among the places that fit (the prices are
`gpu_policy.planner.core.packing`'s)."""

from __future__ import annotations

from collections import defaultdict

import pulp

from gpu_policy.model import Scenario
from gpu_policy.model.layout import Layout
from gpu_policy.packing.fragmentation import WorkloadMix
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.packing import placement_costs
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.rule import Rule, Stage


def packing_stage(m: PlanProgram, s: Scenario, layout: Layout, mix: WorkloadMix) -> pulp.LpAffineExpression:
    """Open as few empty nodes as possible; then as few free GPUs for fractions (fractions
    share a GPU when they can: the price below sees one placement at a time, so it cannot
    tell two fractions sharing a GPU from two on two GPUs); then the placements that grow
    the expected fragmentation least (`gpu_policy.planner.core.packing`). Each term weighs less
    than one unit of the one before."""
    options = [(shape.representative(), n, None) for n, shape in m.placement.whole]
    options += [(shape.representative(), n, i) for n, i, shape in m.placement.frac]
    keys = list(m.placement.whole.values()) + list(m.placement.frac.values())
    costs = placement_costs(s, layout, mix, options)
    opened_gpus = [terms for (n, i), (terms, _) in m.placement.shared.items() if layout.nodes[n].slots[i].free]
    gpu_weight = 1 / (len(opened_gpus) + 2)
    scale = (sum(abs(c) * (var.upBound or 1) for c, var in zip(costs, keys)) + 1) / gpu_weight
    objective: dict = {var: cost / scale for var, cost in zip(keys, costs)}
    for terms in opened_gpus:
        for var in terms:
            objective[var] = objective.get(var, 0) + gpu_weight
    used_on: dict[str, dict] = defaultdict(dict)
    for (n, shape), var in m.placement.whole.items():
        used_on[n][var] = shape.whole_gpus
    for (n, _i, shape), var in m.placement.frac.items():
        used_on[n][var] = used_on[n].get(var, 0) + shape.gpus
    for n, terms in used_on.items():
        nl = layout.nodes[n]
        if all(slot.free for slot in nl.slots):
            opened = m.binary("opened", 0)
            # work placed on n <= capacity[n] * opened[n]
            m.add(affine({**terms, opened: -max(1, nl.capacity)}) <= 0, "opened")
            objective[opened] = 1
    return affine(objective)


class Packing(Rule):
    """The packing stage, where replicas are placed on detailed nodes and a workload mix
    prices the placements."""

    name = "packing"
    #: Where its stage ranks: last, among placements every other objective finds equal.
    PACKING = 100

    def stages(self, ctx: PlanContext) -> list[Stage]:
        if not (ctx.m.placement.whole or ctx.m.placement.frac) or ctx.mix is None:
            return []
        return [Stage(self.PACKING, lambda: [("packing", packing_stage(ctx.m, ctx.scenario, ctx.layout, ctx.mix))])]
