"""The metrics' own arithmetic: Jain's index, percentiles, sharing safety, queueing."""

import pytest

from gpu_policy.sim.teams import POLICIES, SimConfig, simulate
from gpu_policy.sim.teams.compare import sharing_safety
from gpu_policy.sim.teams.metrics import Ledger, Stats, jain, measure
from gpu_policy.sim.teams.shares import owed_teams, team_shares
from tests.sim.teams.conftest import job, run


def test_jain_is_one_when_equal_and_one_over_n_at_worst():
    assert jain([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain([1.0, 0.5]) == pytest.approx(1.5 ** 2 / (2 * 1.25))
    assert jain([]) is None


def test_stats_of_no_values_are_none():
    assert Stats.of([]) == Stats(None, None, None)
    s = Stats.of([float(x) for x in range(1, 101)])
    assert (s.mean, s.p50, s.p95) == (50.5, 50.5, pytest.approx(95.05))


def test_sharing_safety_names_the_teams_worse_than_under_static():
    # a waits behind b's long jobs under fifo; under static a's quota is kept free for it
    jobs = [job(f"b-{i}", "b", 0, 8, 10_000) for i in range(2)] + [job("a-0", "a", 100, 8, 100)]
    results = [measure(run(p, jobs, {"a": 8, "b": 8})) for p in ("static", "fifo")]
    assert sharing_safety(results) == {"static": [], "fifo": ["a"]}
    assert sharing_safety(results[1:]) == {}


def test_a_job_that_never_starts_waits_until_the_end():
    result = run("static", [job("c-0", "c", 50, 1, 100), job("a-0", "a", 0, 1, 1000)], {"a": 8, "c": 0})
    m = measure(result)
    assert result.end_s == 1000 and m.unstarted == 1
    assert m.teams["c"].queueing.mean == 950 and m.teams["c"].jct.mean is None


@pytest.mark.parametrize("b_duration, quick", [(200, 1), (1000, 0)])
def test_a_victim_started_again_within_two_rounds_is_counted(b_duration, quick):
    """a borrows the node; b's job reclaims it at 4200 and leaves after `b_duration`;
    a starts again at once (nothing runs): within 600 s of its preemption, or not."""
    jobs = [job("a-borrow", "a", 0, 8, 10_000), job("b-own", "b", 4000, 8, b_duration)]
    m = measure(run("kai-like", jobs, {"a": 0, "b": 8}, nodes=1))
    assert (m.preemptions, m.quick_restarts) == (1, quick)
    assert m.victims_within_share == 0          # a held 8 GPUs above its fair share of 0


def test_churn_counters_count_only_the_measured_window():
    led = Ledger(["a"], {"a": 8}, 8, (100.0, 200.0))
    led.stopped(50, "a", moved=False, within_share=True)
    led.stopped(150, "a", moved=False, within_share=True)
    led.stopped(160, "a", moved=True, within_share=False)
    led.restarted_soon(199, "a")
    led.restarted_soon(200, "a")
    assert (led.preemptions["a"], led.moves["a"], led.victims_within_share["a"], led.quick_restarts["a"]) == (1, 1, 1, 1)


def test_the_measured_time_is_the_whole_window_even_when_the_jobs_end_early():
    result = simulate([job("a-0", "a", 0, 8, 3600)], {"a": 8}, POLICIES["fifo"](),
                      SimConfig(nodes=1, window=(0.0, 4 * 3600.0)))
    m = measure(result)
    assert result.end_s == 3600 and m.utilization == pytest.approx(0.25)
    assert m.held_bins.shape == (1, 4) and list(m.held_bins[0]) == [8, 0, 0, 0]


def test_a_run_is_cut_at_the_drain_limit_and_says_so():
    """The drain limit guards against a policy that never lets a job finish; here
    the job simply runs past it."""
    config = SimConfig(nodes=1, window=(0.0, 1000.0), drain_limit_s=5000.0)
    result = simulate([job("a-0", "a", 0, 8, 10_000)], {"a": 8}, POLICIES["fifo"](), config)
    assert result.horizon_reached and result.end_s == 6000.0
    m = measure(result)
    assert m.horizon_reached and m.finished == 0 and m.unstarted == 0


def test_a_team_is_owed_while_a_waiting_job_keeps_it_within_the_planners_guarantee():
    # the planner's guarantee, min(deserved, demand); demand counts held and waiting GPUs
    quotas, demand = {"a": 16, "b": 17, "c": 4, "d": 0}, {"a": 12, "b": 24, "c": 3, "d": 2}
    shares = team_shares(quotas, demand, capacity=64)
    assert shares.guarantee == {"a": 12, "b": 17, "c": 3, "d": 0}
    held = {"a": 8, "b": 16, "c": 0, "d": 0}
    waiting = [("a", 4), ("b", 8), ("c", 3), ("d", 2)]
    assert owed_teams(shares, held, waiting) == {"a", "c"}   # b: a third 8-GPU job would pass 17; d has no quota
