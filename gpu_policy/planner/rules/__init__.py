"""The policy's rules, one module each (../shared/spec/scenario-and-plan.md, "Policy
semantics"; docs/policy.md says why each rule is what it is):

  vocabulary  the queue tree, shares, tiers, floors and caps, the one tolerance (EPS)
  limits      limits, non-preemptible work within deserved
  claims      claims before borrowing, who starts first, what counts toward a share
  reclaim     reclaim across queues: who gives, who receives, in which tier
  inside      priority inside a queue: predicates, rows and stages together
  victims     which victim goes first
  fits        what a GPU and a node hold: fractions on one GPU, and the capacity rows

The integer program, the reasons a plan gives and any other policy (the simulators)
call these functions; none of them restates a rule. They work on plain numbers
(GPUs a queue holds, its shares) so that a caller can judge a state before or after
a plan, or a state it only imagines. Callers use them as `rules.<name>`.
"""

from gpu_policy.planner.rules.claims import best_fill, relative_share, start_order
from gpu_policy.planner.rules.fits import Room, fits_on_gpu, gpu_room, has_room, node_gpus_room, node_room, per_gpu
from gpu_policy.planner.rules.inside import (gathered_by_moves, may_preempt_inside, may_swap_back,
                                             most_idle_for_inside_victim)
from gpu_policy.planner.rules.limits import limit_blocker, limit_bound, nonpreemptible_blocker, nonpreemptible_bound
from gpu_policy.planner.rules.reclaim import keeps_floor, may_give, may_receive, reclaim_tiers
from gpu_policy.planner.rules.victims import idle_victim, lost_work, victim_order_key, victim_tier
from gpu_policy.planner.rules.vocabulary import EPS, FAIR, GUARANTEE, STRICT, TIERS, QueueTree, Shares, cap, floor

__all__ = [
    "EPS", "FAIR", "GUARANTEE", "QueueTree", "Room", "STRICT", "Shares", "TIERS", "best_fill", "cap", "fits_on_gpu",
    "floor", "gathered_by_moves", "gpu_room", "has_room", "idle_victim", "keeps_floor", "limit_blocker",
    "limit_bound", "lost_work", "may_give", "may_preempt_inside", "may_receive", "may_swap_back",
    "most_idle_for_inside_victim", "node_gpus_room", "node_room", "nonpreemptible_blocker", "nonpreemptible_bound",
    "per_gpu", "reclaim_tiers", "relative_share", "start_order", "victim_order_key", "victim_tier",
]
