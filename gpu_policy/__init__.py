"""gpu-policy: GPU fair share, reclaim and packing for ML pipelines.

The public API lives here; integrations (``gpu_policy.kfp``, ``gpu_policy.airflow``)
and the CLI import only these names.
"""

from gpu_policy._version import DEFAULT_IMAGE, __version__
from gpu_policy.cluster import open_cluster
from gpu_policy.cluster.compose import plan_cluster
from gpu_policy.errors import (ClusterAccessDenied, ClusterError, ClusterObjectError, ClusterUnavailable, GpuPolicyError,
                               ScenarioError, SolverError)
from gpu_policy.fair_share import fair_shares
from gpu_policy.model import Composable, ComposableNode, ComposablePool, Job, Node, Queue, Scenario
from gpu_policy.plan import Composition, JobDecision, Placement, Plan, QueueReport, SolverReport
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.scenario import dump_scenario, load_scenario, parse_scenario, parse_scenario_text, scenario_to_dict

__all__ = [
    "DEFAULT_IMAGE", "ClusterAccessDenied", "ClusterError", "ClusterObjectError", "ClusterUnavailable",
    "Composable", "ComposableNode", "ComposablePool", "Composition", "GpuPolicyError", "Job", "JobDecision", "Node", "Placement", "Plan", "PlannerConfig",
    "Queue", "QueueReport", "Scenario", "ScenarioError", "SolverError", "SolverReport",
    "__version__", "dump_scenario", "fair_shares", "load_scenario", "open_cluster", "parse_scenario",
    "parse_scenario_text", "plan", "plan_cluster", "scenario_to_dict",
]
