"""gpu-policy: GPU fair share, reclaim and packing for ML pipelines.

The public API lives here; integrations (``gpu_policy.kfp``, ``gpu_policy.airflow``)
and the CLI import only these names. Each name is imported on first use (PEP 562), so
a command that never plans (``gpu-policy snapshot``, ``--help``) does not load the
solver, numpy or the Kubernetes client.
"""

from importlib import import_module

from gpu_policy._version import DEFAULT_IMAGE, __version__
from gpu_policy.errors import (ClusterAccessDenied, ClusterError, ClusterObjectError, ClusterUnavailable, GpuPolicyError,
                               ScenarioError, SolverError)
from gpu_policy.model.plan import Composition, JobDecision, Placement, Plan, QueueReport, SolverReport

#: Each lazily imported public name and the module it comes from.
_HOMES = {
    "open_cluster": "gpu_policy.cluster", "plan_cluster": "gpu_policy.actions.cycle",
    "fair_shares": "gpu_policy.planner.core.fair_share",
    **dict.fromkeys(("Composable", "ComposableNode", "ComposablePool", "Job", "Node", "Queue", "Scenario"),
                    "gpu_policy.model"),
    "PlannerConfig": "gpu_policy.planner", "plan": "gpu_policy.planner",
    **dict.fromkeys(("dump_scenario", "load_scenario", "parse_scenario", "parse_scenario_text", "scenario_to_dict"),
                    "gpu_policy.model.scenario_file"),
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'gpu_policy' has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


__all__ = [
    "DEFAULT_IMAGE", "ClusterAccessDenied", "ClusterError", "ClusterObjectError", "ClusterUnavailable",
    "Composable", "ComposableNode", "ComposablePool", "Composition", "GpuPolicyError", "Job", "JobDecision", "Node", "Placement", "Plan", "PlannerConfig",
    "Queue", "QueueReport", "Scenario", "ScenarioError", "SolverError", "SolverReport",
    "__version__", "dump_scenario", "fair_shares", "load_scenario", "open_cluster", "parse_scenario",
    "parse_scenario_text", "plan", "plan_cluster", "scenario_to_dict",
]
