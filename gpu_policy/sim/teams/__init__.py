"""Teams over time: a time-driven simulator of teams' GPU jobs on the philly-vc
workload, comparing static quotas, one FIFO queue, a KAI-like scheduler and
gpu-policy's planner on the same arrivals (docs/simulate.md, "Teams over time")."""

from gpu_policy.sim.teams.compare import (POLICIES, Protocol, TeamsComparison, compare, parse_checkpoint,
                                          parse_days, parse_policies)
from gpu_policy.sim.teams.engine import SimConfig, SimRun, simulate
from gpu_policy.sim.teams.jobs import Decision, RoundView, SimJob
from gpu_policy.sim.teams.metrics import PolicyMetrics, TeamMetrics, measure
from gpu_policy.sim.teams.report import comparison_json, comparison_table, plot_comparison
from gpu_policy.sim.teams.trace import TeamTrace, TraceJob, load_team_trace

__all__ = [
    "POLICIES", "Decision", "PolicyMetrics", "Protocol", "RoundView", "SimConfig", "SimJob", "SimRun",
    "TeamMetrics", "TeamTrace", "TeamsComparison", "TraceJob", "compare", "comparison_json", "comparison_table",
    "load_team_trace", "measure", "parse_checkpoint", "parse_days", "parse_policies", "plot_comparison", "simulate",
]
