"""Move before preempt, as rows: a preempted job of one replica does not fit in the GPUs the
plan leaves free (it would only have had to change place: the plan keeps or moves it
instead). It reads the capacity rows' use of each node and GPU, so it comes after them."""

from __future__ import annotations

from gpu_policy.model.layout import Layout
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.queues import STRICT
from gpu_policy.planner.core.rule import Rule
from gpu_policy.planner.core.scope import Scope
from gpu_policy.planner.core.shapes import shape_of
from gpu_policy.planner.core.telemetry import GpuLimits


def no_room_left_for_victims(m: PlanProgram, layout: Layout, sc: Scope, limits: GpuLimits) -> None:
    """Move before preempt, judged on the state after the plan: a preempted job of one
    replica does not fit in the GPUs the plan leaves free on any detailed node (it would
    only have had to change place; the plan keeps or moves it instead). CPU and memory are
    not looked at, which only makes the rule stricter. Gangs and reclaim nodes of large
    clusters are left out (docs/policy.md, "Known approximations").

    free_after[n] <= gpus[v] - 1 + healthy[n] * (1 - preempted[v]) for a whole-GPU victim;
    for a fraction f: no free GPU, and on every GPU shared after the plan
    used_after[n,i] >= (1 - f + strict) * preempted[v]. On a composable node the free GPUs
    after count what it attaches and detaches, and, when attaching comes before preemption,
    the GPUs it could still take (`Growth.for_victims`).
    """
    for v in (j for j in sc.victims if j.replicas == 1):
        terms, const = m.preempted(v)
        shape = shape_of(v)
        for n in sc.detailed:
            nl = layout.nodes[n]
            if n not in m.placement.node_used or not shape.fits(nl.node):
                continue
            extra, extra_const = m.growth.for_victims(n) if m.growth else ({}, 0.0)
            healthy = len(nl.node.healthy_gpus) + extra_const
            big = healthy + sum(max(0, a) * v.upBound for v, a in extra.items())
            used, used_const = m.placement.node_used[n]
            need = 1 if shape.fractional else shape.whole_gpus
            # healthy + extra - used_after <= need - 1 + big * (1 - preempted)
            m.add(affine({**{x: -a for x, a in used.items()}, **extra, **{x: big * a for x, a in terms.items()}},
                         healthy - used_const + big * const) <= need - 1 + big, "no_room")
            if not shape.fractional:
                continue
            for i, slot in enumerate(nl.slots):
                if (n, i) not in m.placement.shared or not limits.room_for_fraction(n, i, v.gpus):
                    continue
                gpu_terms, gpu_const = m.placement.gpu_used.get((n, i), ({}, slot.used))
                on, on_const = m.placement.shared[n, i]
                level = 1 - v.gpus + STRICT
                # used_after[n,i] >= level * (preempted[v] + shared[n,i] - 1)
                m.add(affine({**gpu_terms, **{x: -level * a for x, a in terms.items()},
                              **{x: -level * a for x, a in on.items()}},
                             gpu_const - level * (const + on_const - 1)) >= 0, "no_room")


class MoveFirst(Rule):
    """Move before preempt: rows only."""

    name = "move_first"

    def rows(self, ctx: PlanContext) -> None:
        no_room_left_for_victims(ctx.m, ctx.layout, ctx.scope, ctx.limits)
