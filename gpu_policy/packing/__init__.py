"""Fragmentation-aware packing: FGD's expected-fragmentation measure and gpu-policy's
packing price, shared by the planner's packing stage and the simulator's policies."""

from gpu_policy.packing.fragmentation import MILLI, WorkloadMix, node_fragmentation, task_fits
from gpu_policy.packing.price import (
    BEST_FIT_WEIGHT,
    CAPACITY_WEIGHT,
    ModelDemand,
    capacity_shortfall,
    displaced,
    packing_fragmentation,
    placement_cost,
)

__all__ = ["BEST_FIT_WEIGHT", "CAPACITY_WEIGHT", "MILLI", "ModelDemand", "WorkloadMix", "capacity_shortfall",
           "displaced", "node_fragmentation", "packing_fragmentation", "placement_cost", "task_fits"]
