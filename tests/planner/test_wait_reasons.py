"""Wait reasons that say what really holds a job back (issue 28): a plan cut short by its
time limit, and GPUs still held by pods shutting down."""

from gpu_policy import load_scenario, parse_scenario
from gpu_policy.model import TERMINATING_QUEUE
from gpu_policy.planner import PlannerConfig, plan
from tests.conftest import SCENARIOS

NO_RECLAIM = "no queue it may reclaim from"


def test_a_plan_cut_short_says_so_in_its_warnings_and_reasons():
    """seed1: team-a holds 30 GPUs against a fair share of 20. A time limit no machine can plan
    within (a microsecond) leaves b-3 and b-4 waiting: for the time limit, not for want of a victim."""
    result = plan(load_scenario(SCENARIOS / "seed1-greedy-team.yaml"), PlannerConfig(time_limit_s=1e-6))
    waiting = [d for d in result.jobs if d.action == "wait" and d.queue == "team-b"]
    assert waiting
    for d in waiting:
        assert "time limit ran out" in d.reason and NO_RECLAIM not in d.reason, d.reason
    assert any("time limit of 1e-06 s ran out" in w for w in result.warnings), result.warnings


def test_gpus_of_pods_shutting_down_are_named():
    """An evicted pod still holds its 8 GPUs: the owner waits for them, and the reason names the pod."""
    scenario = parse_scenario({
        "nodes": [{"name": "n1", "gpus": 8}],
        "queues": [{"name": "team-b", "deserved": 8},
                   {"name": TERMINATING_QUEUE, "deserved": 0, "over_quota_weight": 0}],
        "jobs": [{"name": "a/borrow-0", "queue": TERMINATING_QUEUE, "gpus": 8, "preemptible": False,
                  "running": ["n1"]},
                 {"name": "b/owner", "queue": "team-b", "gpus": 8}],
    })
    reason = plan(scenario).job("b/owner").reason
    assert "8 GPUs are still held by pods shutting down (a/borrow-0)" in reason and NO_RECLAIM not in reason, reason
