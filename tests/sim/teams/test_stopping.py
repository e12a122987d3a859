"""Preemption that loses no work, in the simulator: what a stop costs under each way of
evicting (docs/simulate.md, "Preemption that loses no work").

One node of 8 GPUs. Team a (no quota) borrows it with one 8-GPU job from t=0; team b's 8-GPU
job arrives and reclaims the node at the next round. Checkpoints every 1,800 s of progress.
"""

import pytest

from gpu_policy.model.checkpointing import answer_deadline_s, checkpoint_wait_s, eviction_grace_s
from gpu_policy.sim.teams import measure
from gpu_policy.sim.teams.stopping import CONTRACT, KUBERNETES, Trainer, default_save_s, draw_trainer
from tests.sim.teams.conftest import by_name, job, run

QUOTAS = {"a": 0, "b": 8}


def reclaim(b_arrives: float = 4000):
    return [job("a-borrow", "a", 0, 8, 10_000), job("b-own", "b", b_arrives, 8, 1000)]


def split(result) -> dict:
    """Lost GPU-seconds by kind."""
    return dict(result.ledger.lost_split)


def test_a_save_that_fits_the_grace_period_loses_only_the_save():
    """kai-like evicts with the pod's 30 s; a trainer that saves on SIGTERM in 20 s keeps its work."""
    result = run("kai-like", reclaim(), QUOTAS, nodes=1, saves_on_request=1.0, save_s=20)
    a, b = by_name(result)["a-borrow"], by_name(result)["b-own"]
    assert a.preemptions == 1
    assert split(result) == pytest.approx({"redone": 0, "restarts": 8 * 60, "saving": 8 * 20})
    assert b.first_start == 4220 and b.finish == 5220             # it waited for the save
    assert a.finish == pytest.approx(5220 + 60 + (10_000 - 4200))  # it resumes from the work of 4,200
    assert measure(result).reclaim_wait.p50 == 20


def test_a_save_that_does_not_fit_goes_back_to_the_last_checkpoint():
    """A 40 s save is killed after 30 s: the half-written checkpoint is lost, and so is the
    work since the periodic checkpoint at 3,600; the GPUs spent 30 s saving for nothing."""
    result = run("kai-like", reclaim(), QUOTAS, nodes=1, saves_on_request=1.0, save_s=40)
    a, b = by_name(result)["a-borrow"], by_name(result)["b-own"]
    assert split(result) == pytest.approx({"redone": 8 * 600, "restarts": 8 * 60, "saving": 8 * 30})
    assert b.first_start == 4230
    assert a.finish == pytest.approx(5230 + 60 + (10_000 - 3600))


def test_a_trainer_that_does_not_save_loses_its_work_since_the_checkpoint_at_once():
    result = run("kai-like", reclaim(), QUOTAS, nodes=1, saves_on_request=0.0, save_s=20)
    assert split(result) == pytest.approx({"redone": 8 * 600, "restarts": 8 * 60, "saving": 0})
    assert by_name(result)["b-own"].first_start == 4200
    assert measure(result).reclaim_wait.p95 == 0


def test_gpu_policy_asks_first_so_a_long_save_keeps_the_work():
    """A 100 s save would not fit Kubernetes' 30 s; asked first, the trainer saves and is
    evicted once it has: it loses the 100 s of saving, and b's job waits for them."""
    result = run("gpu-policy", reclaim(), QUOTAS, nodes=1, saves_on_request=1.0, save_s=100)
    a, b = by_name(result)["a-borrow"], by_name(result)["b-own"]
    assert split(result) == pytest.approx({"redone": 0, "restarts": 8 * 60, "saving": 8 * 100})
    assert b.first_start == 4300
    assert a.finish == pytest.approx(5300 + 60 + (10_000 - 4200))
    m = measure(result)
    assert (m.reclaim_wait.p50, m.reclaim_wait.p95) == (100, 100)


@pytest.mark.parametrize("reclaim_wait, start, redone", [
    (300.0, 5400, 0),         # due at 5,400, within 300 s: the victim runs on until then
    (299.0, 5100, 1500),      # not within 299 s: stopped at once, back to its checkpoint at 3,600
])
def test_a_stop_deferred_to_the_victims_checkpoint_loses_nothing(reclaim_wait, start, redone):
    """b's job arrives at 5,100, when a's job (which never saves on request) is 300 s from its
    checkpoint at 5,400."""
    result = run("gpu-policy", reclaim(5100), QUOTAS, nodes=1, reclaim_wait_s=reclaim_wait)
    a, b = by_name(result)["a-borrow"], by_name(result)["b-own"]
    assert a.preemptions == 1 and a.finish == pytest.approx(start + 1000 + 60 + (10_000 - (start - redone)))
    assert split(result) == pytest.approx({"redone": 8 * redone, "restarts": 8 * 60, "saving": 0})
    assert b.first_start == start                 # the claimant waits for the checkpoint
    assert measure(result).reclaim_wait.p50 == start - 5100


def test_a_victim_that_finishes_before_its_checkpoint_just_finishes():
    """Deferred to its checkpoint at 5,400, a's job finishes at 5,300 instead: nothing lost."""
    jobs = [job("a-borrow", "a", 0, 8, 5300), job("b-own", "b", 5100, 8, 1000)]
    result = run("gpu-policy", jobs, QUOTAS, nodes=1, reclaim_wait_s=300.0)
    a, b = by_name(result)["a-borrow"], by_name(result)["b-own"]
    assert a.finish == 5300 and b.first_start == 5300
    assert sum(split(result).values()) == 0


def test_a_moved_job_restarts_on_its_new_node_once_it_has_saved():
    """gpu-policy moves one 4-GPU job beside the other for an 8-GPU start (test_known_answers'
    fragmentation); the mover saves first (asked), then restarts; the big job waits for it."""
    jobs = [job("a-0-short", "a", 0, 4, 1000), job("a-1-long", "a", 0, 4, 100_000),
            job("a-2-short", "a", 0, 4, 1000), job("a-3-long", "a", 0, 4, 100_000),
            job("a-big", "a", 1450, 8, 2000)]
    result = run("gpu-policy", jobs, {"a": 16, "b": 0}, saves_on_request=1.0, save_s=40)
    moved = next(j for j in result.jobs if j.moves)
    big = by_name(result)["a-big"]
    assert big.first_start == 1540                # the round at 1,500, then the mover's 40 s save
    assert moved.lost_gpu_s == pytest.approx(4 * (40 + 60))
    assert moved.finish == pytest.approx(1540 + 60 + (100_000 - 1500))


@pytest.mark.parametrize("policy", ["kai-like", "gpu-policy"])
@pytest.mark.parametrize("min_runtime, victim", [(0, "a-young"), (1000, "a-old")])
def test_a_job_younger_than_the_minimum_runtime_is_no_victim(policy, min_runtime, victim):
    """a-young started at 3,600 (when a-first finished); b reclaims 4 GPUs at 4,200. Both of
    a's jobs have 600 s of work since their last checkpoint, and the younger goes first (kai-like:
    the youngest; gpu-policy: the same lost work, then the most recent), unless it has run less
    than the minimum runtime."""
    jobs = [job("a-old", "a", 0, 4, 20_000), job("a-first", "a", 0, 4, 3600), job("a-young", "a", 3500, 4, 20_000),
            job("b-own", "b", 4000, 4, 1000)]
    result = run(policy, jobs, QUOTAS, nodes=1, min_runtime_s=min_runtime)
    assert [j.name for j in result.jobs if j.preemptions] == [victim]


def test_the_contracts_budget_for_a_save():
    """Seconds a victim may save before it is killed: the answer's deadline, then the grace period."""
    coop, quiet = Trainer(100, True), Trainer(100, False)
    assert KUBERNETES.save_budget_s(coop) == 30 and KUBERNETES.save_budget_s(quiet) == 0
    assert CONTRACT.save_budget_s(coop) == answer_deadline_s(100) + eviction_grace_s(100) == 200 + 130
    assert CONTRACT.save_budget_s(quiet) == 0
    assert (answer_deadline_s(10), answer_deadline_s(1000)) == (60, 600)      # at least 60 s, at most the deadline
    assert (eviction_grace_s(0), eviction_grace_s(1000)) == (30, 600)         # the pod's own, at most the deadline
    assert checkpoint_wait_s(150, 25) == 205


def test_save_times_grow_with_the_gpus():
    assert (default_save_s(1), default_save_s(16)) == (25, 100)
    assert draw_trainer("x", 16, 0.5, seed=0).save_s == 100
    assert draw_trainer("x", 16, 0.5, seed=0, save_s=7).save_s == 7


def test_the_draw_of_cooperating_trainers_is_reproducible():
    names = [f"job-{i:04d}" for i in range(2000)]

    def cooperating(share, seed):
        return {n for n in names if draw_trainer(n, 1, share, seed).saves_on_request}

    first = cooperating(0.5, seed=0)
    assert first == cooperating(0.5, seed=0)                  # the same seed, the same jobs
    assert 900 < len(first) < 1100                            # about half
    assert first != cooperating(0.5, seed=1)                  # another seed, other jobs
    assert cooperating(0.25, seed=0) <= first                 # a smaller share: a subset, same seed
    assert cooperating(0.0, seed=0) == set() and cooperating(1.0, seed=0) == set(names)
    # a job's draw depends on its name and the seed alone, not on the jobs simulated beside it
    alone = run("kai-like", [job("job-0001", "a", 0, 1, 10)], QUOTAS, saves_on_request=0.5)
    assert alone.jobs[0].trainer.saves_on_request == ("job-0001" in first)


def test_gpu_policys_scenario_carries_what_the_planner_decides_with(monkeypatch):
    """Each round's scenario: every job's checkpoint interval, save time and cooperation, a
    running job's checkpoint age and time running, a waiting job's time waiting, every team's
    minimum runtime and the cluster's reclaim wait."""
    from gpu_policy.sim.teams import ours

    seen = []
    real_plan = ours.plan
    monkeypatch.setattr(ours, "plan", lambda scenario, config: seen.append(scenario) or real_plan(scenario, config))
    run("gpu-policy", reclaim(), QUOTAS, nodes=1, saves_on_request=1.0, save_s=45, reclaim_wait_s=120,
        min_runtime_s=10)
    scenario = next(s for s in seen if len(s.jobs) == 2)          # the round at 4,200: a-borrow runs, b-own waits
    a, b = sorted(scenario.jobs, key=lambda j: j.name)
    assert (a.running, a.checkpoint_age_s, a.running_for_s, a.waiting_for_s) == (["node-0"], 600, 4200, None)
    assert (b.running, b.checkpoint_age_s, b.running_for_s, b.waiting_for_s) == ([], None, None, 200)
    for j in (a, b):
        assert (j.checkpoint_every_s, j.save_s, j.saves_on_request) == (1800, 45, True)
    assert {q.min_runtime_s for q in scenario.queues} == {10} and scenario.policy.reclaim_wait_s == 120
