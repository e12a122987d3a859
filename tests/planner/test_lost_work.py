"""Lost work, waiting for a checkpoint, minimum runtime and preemption delay (issue 38): the
one home of a victim's loss (rules.victims.lost_work) and the protection rule, on small
clusters decided whole and on large ones the greedy scope narrows."""

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.model import Job
from gpu_policy.planner.rules.victims import DEFAULT_SAVE_S, checkpoint_due, lost_work

GENEROUS = PlannerConfig(time_limit_s=600.0)


def test_a_job_that_saves_on_request_loses_its_save_time():
    job = Job("j", "q", 4, checkpoint_age_s=3000, saves_on_request=True, save_s=30)
    assert lost_work(job, 1800).gpu_seconds == 4 * 30
    assert lost_work(Job("j", "q", 2, saves_on_request=True), 1800).gpu_seconds == 2 * DEFAULT_SAVE_S


def test_a_due_checkpoint_within_the_wait_costs_nothing_and_says_when():
    job = Job("j", "q", 4, checkpoint_every_s=1800, checkpoint_age_s=3500)  # 100 s since its last, due in 100
    assert checkpoint_due(job) == 100
    assert lost_work(job, 1800, reclaim_wait_s=300) == (0.0, 100)
    assert lost_work(job, 1800, reclaim_wait_s=60) == (4 * 3500, None)  # due beyond the wait
    assert lost_work(job, 1800) == (4 * 3500, None)                    # no waiting at all
    assert lost_work(Job("j", "q", 4, checkpoint_every_s=1800), 1800, 300) == (4 * 1800, None)  # unknown age


def test_the_plan_says_when_a_deferred_victim_is_stopped():
    result = plan(parse_scenario({
        "policy": {"reclaim_wait_s": 300}, "nodes": [{"name": "n", "gpus": 4}],
        "queues": [{"name": "a"}, {"name": "b", "deserved": 4}],
        "jobs": [{"name": "run", "queue": "a", "gpus": 4, "running": ["n"], "checkpoint_every_s": 600,
                  "checkpoint_age_s": 500},
                 {"name": "new", "queue": "b", "gpus": 4}]}), GENEROUS)
    d = result.job("run")
    assert d.action == "preempt" and d.evict_after_s == 100
    assert result.job("new").action == "start" and result.job("new").evict_after_s is None
    assert result.to_dict()["jobs"][0]["evict_after_s"] == 100


def large(queues: list[dict], jobs: list[dict]) -> dict:
    """40 nodes of 8 GPUs (past `exact_nodes`: the greedy scope narrows the program)."""
    return {"nodes": [{"name": f"n{i:02d}", "gpus": 8} for i in range(40)], "queues": queues, "jobs": jobs}


def test_a_large_cluster_keeps_young_jobs_and_takes_old_ones():
    young = [{"name": f"young-{i}", "queue": "a", "gpus": 8, "running": [f"n{i:02d}"], "running_for_s": 60,
              "checkpoint_age_s": 10} for i in range(20)]
    old = [{"name": f"old-{i}", "queue": "a", "gpus": 8, "running": [f"n{20 + i:02d}"], "running_for_s": 7200,
            "checkpoint_age_s": 3000} for i in range(20)]
    new = [{"name": f"b-{i}", "queue": "b", "gpus": 8} for i in range(10)]
    result = plan(parse_scenario(large([{"name": "a", "min_runtime_s": 600}, {"name": "b", "deserved": 160}],
                                       young + old + new)), GENEROUS)
    assert all(result.job(f"young-{i}").action == "keep" for i in range(20))
    assert sum(result.job(f"old-{i}").action == "preempt" for i in range(20)) == 10
    assert all(result.job(f"b-{i}").action == "start" for i in range(10))


def test_a_large_cluster_starts_a_delayed_job_only_on_free_gpus():
    running = [{"name": f"a-{i}", "queue": "a", "gpus": 8, "running": [f"n{i:02d}"]} for i in range(39)]
    jobs = running + [{"name": "b-eager", "queue": "b", "gpus": 8, "waiting_for_s": 30, "submitted_at": 1},
                      {"name": "b-eager-2", "queue": "b", "gpus": 8, "waiting_for_s": 30, "submitted_at": 2}]
    result = plan(parse_scenario(large([{"name": "a"}, {"name": "b", "deserved": 320, "preemption_delay_s": 300}],
                                       jobs)), GENEROUS)
    starts = [d for d in result.jobs if d.action == "start"]
    assert [d.replicas[0].node for d in starts] == ["n39"]  # the one free node, and nobody preempted for them
    assert result.summary["preemptions"] == result.summary["moves"] == 0
    waiting = next(d for d in result.jobs if d.name.startswith("b-eager") and d.action == "wait")
    assert waiting.code == "PreemptionDelay"
