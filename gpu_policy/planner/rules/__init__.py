"""The policy's rules, one module each (../shared/spec/scenario-and-plan.md, "Policy
semantics"; docs/policy.md says why each rule is what it is). Each rule module holds the
rule's predicates (plain numbers in, a verdict out), its reasons (`why_wait`,
`why_preempt`: text and code, asked in order by `gpu_policy.planner.reasons`) and, where the
rule is part of the integer program, its rows and objective stages as a `Rule`
(`rules.protocol`):

  vocabulary   the queue tree, shares, tiers, floors and caps, the one tolerance (EPS)
  protocol     the `Rule` protocol, the stage families in their order (`STAGE_ORDER`)
  context      `PlanContext`: what every rule of one plan reads
  order        the rules in the order the program adds their rows (`RULES`)
  composition  GPU composition: attach, pick and detach variables, the attach/detach stages
  fits         what a GPU holds; the capacity rows (nodes, GPUs, MIG slices, pools), move
               before preempt (no room left for victims)
  limits       limits, non-preemptible work within deserved
  claims       claims before borrowing, who starts first, what counts toward a share; the
               guarantee and fair-share stages and the starts stage
  reclaim      reclaim across queues: who gives, who receives, in which tier
  inside       priority inside a queue: its rows and the priority_p<P> stages
  victims      which victim goes first and what it costs (`victim_cost`, which the greedy
               scope's node rankings count too); the preemption stages
  moves        the moves stage
  packing      the packing stage

The integer program (`rules.protocol.build` loops over `rules.order.in_order(composer)`),
the reasons a plan gives and any other policy (the simulators) call these
functions; none of them restates a rule. The predicates work on plain numbers (GPUs a
queue holds, its shares) so that a caller can judge a state before or after a plan, or a
state it only imagines. Callers use them as `rules.<name>`: each is loaded from its module
on first use, so that a module the rows need may itself import a predicate.
"""

from __future__ import annotations

import importlib

#: Where each predicate lives: name -> rule module.
_HOMES = {
    **dict.fromkeys(("EPS", "FAIR", "GUARANTEE", "STRICT", "TIERS", "QueueTree", "Shares", "cap", "floor"),
                    "vocabulary"),
    **dict.fromkeys(("limit_blocker", "limit_bound", "nonpreemptible_blocker", "nonpreemptible_bound"), "limits"),
    **dict.fromkeys(("best_fill", "relative_share", "start_order"), "claims"),
    **dict.fromkeys(("keeps_floor", "may_give", "may_receive", "reclaim_tiers"), "reclaim"),
    **dict.fromkeys(("gathered_by_moves", "may_preempt_inside", "may_swap_back", "most_idle_for_inside_victim"),
                    "inside"),
    **dict.fromkeys(("VictimCost", "add_cost", "idle_victim", "lost_work", "total_cost", "victim_cost",
                     "victim_order_key", "victim_tier"), "victims"),
    **dict.fromkeys(("Room", "gpu_room", "node_gpus_room", "node_room"),
                    "fits"),
}


def __getattr__(name: str):
    """`rules.<name>`, loaded from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_HOMES)
