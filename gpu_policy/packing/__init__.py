"""Fragmentation-aware packing: the expected-fragmentation measure shared by the
planner's packing stage and the simulator's policies."""

from gpu_policy.packing.fragmentation import MILLI, WorkloadMix, node_fragmentation, placement_cost

__all__ = ["MILLI", "WorkloadMix", "node_fragmentation", "placement_cost"]
