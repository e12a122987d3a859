"""The policy's rules, one module each (../shared/spec/scenario-and-plan.md, "Policy
semantics"; docs/policy.md says why each rule is what it is), in the one order the planner
asks them (`RULES`): the scope asks who may take from whom, the builder adds their
variables and rows in this order (their stages go by rank), the reasons are asked in this
order and the first answer is the reason.

  fits         what fits where: the capacity rows (`capacity`), why a job can never run or
               the free room cannot hold it
  topology     a job's replicas in one domain of a level, or in few; packing by domain
  composition  GPU composition: attach, pick and detach variables, the attach and detach
               stages, what attaching could not do
  move_first   move before preempt: no room left for a victim
  limits       limits, non-preemptible work within deserved
  model_limits a queue's most GPUs of one GPU model
  protection   minimum runtime and preemption delay: who may not be taken or moved yet
  claims       claims before borrowing, who starts first, what counts toward a share; the
               guarantee, fair-share and starts stages
  reclaim      reclaim across queues: who gives, who receives, in which tier
  inside       priority inside a queue: its rows and the priority stages
  victims      which victim goes first and what it costs; the preemption stages
  moves        the moves stage, why a job moves
  packing      the packing stage

Each rule imports the planner's core (`gpu_policy.planner.core`), which imports no rule.
"""

from __future__ import annotations

from gpu_policy.planner.core.rule import Rule
from gpu_policy.planner.rules.claims import Claims
from gpu_policy.planner.rules.composition import GpuComposition
from gpu_policy.planner.rules.fits import Fits
from gpu_policy.planner.rules.inside import Inside
from gpu_policy.planner.rules.limits import Limits
from gpu_policy.planner.rules.model_limits import ModelLimits
from gpu_policy.planner.rules.move_first import MoveFirst
from gpu_policy.planner.rules.moves import Moves
from gpu_policy.planner.rules.packing import Packing
from gpu_policy.planner.rules.protection import Protection
from gpu_policy.planner.rules.reclaim import Reclaim
from gpu_policy.planner.rules.topology import Topology
from gpu_policy.planner.rules.victims import Victims

#: Every rule, in the order the planner asks them (the module docstring says what each does).
RULES: tuple[type[Rule], ...] = (Fits, Topology, GpuComposition, MoveFirst, Limits, ModelLimits, Protection, Claims,
                                 Reclaim, Inside, Victims, Moves, Packing)

__all__ = ["RULES"]
