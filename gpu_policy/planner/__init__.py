"""The planner: fair share, reclaim and packing as one staged integer program."""

from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.planner import plan

__all__ = ["PlannerConfig", "plan"]
