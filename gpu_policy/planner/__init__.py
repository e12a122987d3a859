"""The planner: fair share, reclaim and packing as one staged integer program."""

from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.planner import plan, start_order

__all__ = ["PlannerConfig", "plan", "start_order"]
