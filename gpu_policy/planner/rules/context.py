"""What every rule of the program reads: the scenario and the state before the plan, the
program's decisions, and (computed once, on first use) what each queue holds after the
plan and what of it counts toward its shares."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from gpu_policy.model import Job, Scenario
from gpu_policy.planner.rules.claims import Accounts, Credit, accounts, credits

if TYPE_CHECKING:
    from gpu_policy.packing.fragmentation import WorkloadMix
    from gpu_policy.planner.config import PlannerConfig
    from gpu_policy.model.layout import Layout
    from gpu_policy.planner.program import PlanProgram
    from gpu_policy.planner.rules.composition import Composer
    from gpu_policy.planner.scope import Scope, Standing
    from gpu_policy.planner.telemetry import GpuLimits


@dataclass
class PlanContext:
    """One plan's program and what its rules read."""

    m: PlanProgram
    scenario: Scenario
    layout: Layout            # the cluster now, with a free slot for each GPU a composable node could take
    scope: Scope
    standing: Standing
    config: PlannerConfig
    limits: GpuLimits
    order: list[Job]          # waiting jobs in start order (rules.start_order)
    mix: WorkloadMix | None   # the workload mix packing prices placements for (None: no packing stage)
    composer: Composer


    @cached_property
    def accounts(self) -> Accounts:
        """Per leaf queue, what it holds after the plan."""
        return accounts(self.m, self.scenario, self.standing)

    @cached_property
    def credits(self) -> dict[str, Credit]:
        """Per leaf queue, what counts toward its shares (adds the claims' variables: the
        rules that read it come after `rules.claims` in `rules.order.RULES`)."""
        return credits(self.m, self.standing, self.accounts)
