"""One victim cost everywhere (victim_cost, total_cost): the greedy scope of a
large cluster ranks candidate nodes as the program's preemption stages rank victims, so an
idle job of a queue above its share goes first at every cluster size, not only where every
node is decided whole."""

from gpu_policy import Job, PlannerConfig, parse_scenario, plan
from gpu_policy.actions.cycle import plan_with_telemetry
from gpu_policy.planner.rules.victims import total_cost, victim_cost

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


def beside_a_busy_job(nodes: int) -> dict:
    """`nodes` nodes of 4 GPUs, each held by one busy 4-GPU job of team-a (1 minute since its
    checkpoint: 4 GPU-minutes), but node-<last> holds a-idle (2 GPUs, 50 minutes: 100
    GPU-minutes), idle for 25 minutes, beside a-busy (2 GPUs, 30 s: 1 GPU-minute). team-b
    comes back for 4 GPUs. The program's stages count busy victims before idle ones: taking
    a-idle and a-busy costs 1 busy GPU-minute, any other node 4, although a-idle alone loses
    more work than any other node's victims."""
    last = nodes - 1
    jobs = [{"name": f"a-{i}", "queue": "team-a", "gpus": 4, "running": [f"node-{i}"], "priority": 10,
             "submitted_at": i, "checkpoint_age_s": 60} for i in range(last)]
    jobs += [{"name": "a-idle", "queue": "team-a", "gpus": 2, "running": [f"node-{last}"], "priority": 10,
              "submitted_at": 0, "checkpoint_age_s": 3000},
             {"name": "a-busy", "queue": "team-a", "gpus": 2, "running": [f"node-{last}"], "priority": 10,
              "submitted_at": 0, "checkpoint_age_s": 30},
             {"name": "b-new", "queue": "team-b", "gpus": 4, "submitted_at": nodes}]
    return {"nodes": [{"name": f"node-{i}", "gpus": 4} for i in range(nodes)],
            "queues": [{"name": "team-a", "deserved": 2 * nodes}, {"name": "team-b", "deserved": 2 * nodes}],
            "jobs": jobs,
            "telemetry": {"jobs": {"a-idle": {"utilization": 1, "for_s": 1500}}}}


def test_an_idle_job_beside_a_cheap_busy_one_goes_on_a_small_cluster():
    s = parse_scenario(beside_a_busy_job(8))
    assert sorted(preempted(plan_with_telemetry(s, config=GENEROUS))) == ["a-busy", "a-idle"]


def test_an_idle_job_beside_a_cheap_busy_one_goes_on_1000_nodes():
    """Ranked by the highest tier taken and then by all the work lost, the greedy scope put
    a-idle's node (101 GPU-minutes) after every other (4): the program never saw it and
    preempted a busy 4-GPU job. Ranked by the program's cost it is the first candidate."""
    s = parse_scenario(beside_a_busy_job(1000))
    result = plan_with_telemetry(s, config=GENEROUS)
    assert sorted(preempted(result)) == ["a-busy", "a-idle"] and result.job("b-new").action == "start"


def victim(name: str, priority: int, gpus: int, age_s: float) -> Job:
    return Job(name=name, queue="q", gpus=gpus, priority=priority, running=["n"], checkpoint_age_s=age_s)


def test_total_cost_compares_as_the_preemption_stages_do():
    """Highest tier first, a tier without victims costing nothing; then GPU-minutes, then
    how many; idle victims count only where all else ties."""
    cost = lambda *jobs: total_cost(victim_cost(j, 1800.0, idle) for j, idle in jobs)  # noqa: E731
    low, low_old, high = victim("low", 1, 1, 60), victim("low-old", 1, 1, 6000), victim("high", 5, 1, 0)
    idle_old = victim("idle-old", 9, 4, 6000)
    assert cost((low_old, False)) < cost((high, False))           # any higher priority costs more
    assert cost((high, False)) < cost((high, False), (low, False))  # more victims of a lower tier too
    assert cost((low, False), (idle_old, True)) < cost((low_old, False))  # idle work counts last
    assert cost((low, False)) < cost((low, False), (idle_old, True))  # but it counts
    assert cost((low, False), (low, False)) > cost((victim("two", 1, 2, 60), False))  # fewer at equal work
    assert victim_cost(low, 1800.0) == ((1, 1), 1, 0.0) and victim_cost(idle_old, 0, True).tier == (0, 0)


def test_among_victims_losing_the_same_work_the_one_free_soonest_goes():
    """A 1-GPU victim that saves on request in 25 s and one with 5 s of unsaved work both lose
    0 GPU-minutes: the one evicted at once goes, so the claimant waits for no save (the saver
    is the more recent, which alone would have made it the victim)."""
    s = parse_scenario({
        "nodes": [{"name": "n1", "gpus": 2}],
        "queues": [{"name": "a"}, {"name": "b", "deserved": 1}],
        "jobs": [{"name": "a-quick", "queue": "a", "gpus": 1, "running": ["n1"], "checkpoint_age_s": 5,
                  "submitted_at": 1},
                 {"name": "a-saver", "queue": "a", "gpus": 1, "running": ["n1"], "saves_on_request": True,
                  "save_s": 25, "submitted_at": 2},
                 {"name": "b-1", "queue": "b", "gpus": 1}]})
    result = plan(s)
    assert result.job("a-quick").action == "preempt" and result.job("a-saver").action == "keep"
