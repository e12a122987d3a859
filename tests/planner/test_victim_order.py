"""One victim order everywhere (rules.victim_tier, rules.victim_order_key): the greedy scope
of a large cluster ranks candidate nodes as the program ranks victims, so an idle job of a
queue above its share goes first at every cluster size, not only where every node is
decided whole."""

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.cluster.compose import plan_with_telemetry

GENEROUS = PlannerConfig(time_limit_s=600.0)


def cluster(nodes: int) -> dict:
    """`nodes` nodes of 4 GPUs, each held by one 4-GPU job of team-a (priority 10, 1 minute
    since its checkpoint), but node-<last> holds a-idle (priority 50, 50 minutes since its
    checkpoint) that has sat idle for 25 minutes. team-b comes back for 4 GPUs: team-a, above
    its fair share by 4, gives one job."""
    last = nodes - 1
    jobs = [{"name": f"a-{i}", "queue": "team-a", "gpus": 4, "running": [f"node-{i}"], "priority": 10,
             "submitted_at": i, "checkpoint_age_s": 60} for i in range(last)]
    jobs.append({"name": "a-idle", "queue": "team-a", "gpus": 4, "running": [f"node-{last}"], "priority": 50,
                 "submitted_at": 0, "checkpoint_age_s": 3000})
    jobs.append({"name": "b-new", "queue": "team-b", "gpus": 4, "submitted_at": nodes})
    return {"nodes": [{"name": f"node-{i}", "gpus": 4} for i in range(nodes)],
            "queues": [{"name": "team-a", "deserved": 2 * nodes}, {"name": "team-b", "deserved": 2 * nodes}],
            "jobs": jobs,
            "telemetry": {"jobs": {"a-idle": {"utilization": 1, "for_s": 1500}}}}


def preempted(result) -> list[str]:
    return [j.name for j in result.jobs if j.action == "preempt"]


def test_the_idle_job_goes_first_on_a_small_cluster():
    s = parse_scenario(cluster(8))
    assert preempted(plan_with_telemetry(s, config=GENEROUS)) == ["a-idle"]


def test_the_idle_job_goes_first_on_1000_nodes():
    """Above 16 nodes the greedy scope picks the candidate nodes: ranked by priority alone it
    left a-idle's node (priority 50) out, and the program preempted a busy priority-10 job."""
    s = parse_scenario(cluster(1000))
    with_telemetry = plan_with_telemetry(s, config=GENEROUS)
    assert preempted(with_telemetry) == ["a-idle"] and with_telemetry.job("b-new").action == "start"
    without = plan(s, GENEROUS)  # no telemetry: nothing is known to be idle, the lowest priority goes
    assert len(preempted(without)) == 1 and preempted(without) != ["a-idle"]
