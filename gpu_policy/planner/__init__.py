"""The planner: fair share, reclaim and packing as one staged integer program."""

from gpu_policy.planner.config import PlannerConfig


def __getattr__(name: str):
    """`plan` and `start_order` on first use: reading the settings (the CLI's option
    defaults) does not load the solver."""
    if name not in ("plan", "start_order"):
        raise AttributeError(f"module 'gpu_policy.planner' has no attribute {name!r}")
    from gpu_policy.planner import planner

    return getattr(planner, name)


__all__ = ["PlannerConfig", "plan", "start_order"]
