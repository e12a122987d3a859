"""Fair share over time in the simulator: the usage history's exact decay and window, KAI's
division (`kai-time`), gpu-policy with and without history, and the entitlement error."""

import math

import numpy as np
import pytest

from gpu_policy.model.usage import UsageHistory as ControllerUsage
from gpu_policy.sim.teams import POLICIES, SimConfig, measure, simulate
from gpu_policy.sim.teams.jobs import RoundView
from gpu_policy.sim.teams.kai_time import WINDOW_S, kai_division
from gpu_policy.sim.teams.metrics import WEEK_S, Ledger, borrowed_heavily
from gpu_policy.sim.teams.shares import team_shares
from gpu_policy.sim.teams.usage import UsageHistory
from tests.sim.teams.conftest import job, run
from tests.sim.teams.test_invariants import QUOTAS, random_jobs

DAY = 86_400.0


def riemann(times: list[float], held: list[float], t: float, lo: float, h: float | None, steps: int = 200_000):
    """The decayed GPU-seconds of a step function held[k] from times[k], over [lo, t], summed
    on a fine grid: what the history must give in closed form."""
    tau = lo + (np.arange(steps) + 0.5) * (t - lo) / steps
    level = np.array(held)[np.searchsorted(times, tau, side="right") - 1]
    decay = np.ones_like(tau) if h is None else 0.5 ** ((t - tau) / h)
    return float((level * decay).sum() * (t - lo) / steps)


def test_usage_decays_exactly_with_the_half_life():
    u = UsageHistory(["a", "b"], half_life_s=DAY, start_s=0.0)
    u.changed(0.0, "a", 8)
    # held for one half-life: 8 GPUs x (h / ln 2) x (1 - 1/2)
    assert u.gpu_hours(DAY)["a"] == pytest.approx(8 * DAY / math.log(2) * 0.5 / 3600)
    # held for ever, it tends to 8 x h / ln 2: the planner's "busy all along"
    assert u.gpu_hours(60 * DAY)["a"] == pytest.approx(8 * DAY / math.log(2) / 3600)
    u.changed(60 * DAY, "a", -8)
    assert u.gpu_hours(61 * DAY)["a"] == pytest.approx(u.gpu_hours(60 * DAY)["a"] / 2)
    assert u.gpu_hours(61 * DAY)["b"] == 0.0


def test_usage_of_several_changes_matches_a_fine_sum():
    u = UsageHistory(["a"], half_life_s=5000.0, start_s=100.0)
    times, held = [100.0], [0.0]
    for t, delta in [(300.0, 4), (900.0, 8), (900.0, -2), (4000.0, -6), (7000.0, 1)]:
        u.changed(t, "a", delta)
        times.append(t)
        held.append(held[-1] + delta)
    assert u.gpu_hours(9000.0)["a"] * 3600 == pytest.approx(riemann(times, held, 9000.0, 100.0, 5000.0), rel=1e-5)
    assert u.gpu_hours(2000.0)["a"] * 3600 == pytest.approx(riemann(times, held, 2000.0, 100.0, 5000.0), rel=1e-5)


def test_the_simulated_usage_is_what_the_controller_would_keep():
    """The same GPUs held, sampled as the controller samples them (model.usage.UsageHistory)."""
    u = UsageHistory(["a", "b"], half_life_s=5000.0, start_s=0.0)
    kept = ControllerUsage(0.0, 5000.0)
    held = {"a": 0, "b": 0}
    for t, team, delta in [(300.0, "a", 4), (900.0, "b", 8), (4000.0, "a", -4), (7000.0, "b", -3)]:
        kept.add(held, t - kept.at)
        u.changed(t, team, delta)
        held[team] += delta
    kept.add(held, 9000.0 - kept.at)
    assert u.gpu_hours(9000.0) == pytest.approx(kept.gpu_h, rel=1e-12)


@pytest.mark.parametrize("half_life", [None, 3000.0])
def test_kais_usage_is_a_decayed_part_of_the_cluster_over_a_sliding_window(half_life):
    u = UsageHistory(["a", "b"], half_life_s=half_life, start_s=0.0)
    u.changed(1000.0, "a", 16)
    u.changed(5000.0, "b", 4)
    u.changed(8000.0, "a", -16)
    t, window, capacity = 12_000.0, 6000.0, 32
    fractions = u.window_fractions(t, window, capacity)
    cap = riemann([0.0], [capacity], t, t - window, half_life)
    assert fractions["a"] == pytest.approx(riemann([0, 1000, 8000], [0, 16, 0], t, t - window, half_life) / cap,
                                           rel=1e-5)
    assert fractions["b"] == pytest.approx(riemann([0, 5000], [0, 4], t, t - window, half_life) / cap, rel=1e-5)
    # a held half the cluster from the start: its part is 1/2, whatever the decay
    assert u.window_fractions(4000.0, window, capacity)["a"] == pytest.approx(
        riemann([0, 1000], [0, 16], 4000.0, 0.0, half_life) / riemann([0.0], [capacity], 4000.0, 0.0, half_life))
    # usage older than the window is forgotten
    assert u.window_fractions(8000.0 + window, window, capacity)["a"] == pytest.approx(0.0, abs=1e-12)
    assert u.window_fractions(0.0, window, capacity) == {"a": 0.0, "b": 0.0}


@pytest.mark.parametrize("deserved, usage, k, shares", [
    # KAI's own arithmetic on 16 GPUs, both queues asking for all of them
    ({"a": 0, "b": 0}, {"a": 0.6, "b": 0.2}, 1.0, {"a": 5, "b": 11}),
    ({"a": 0, "b": 0}, {"a": 0.3, "b": 0.1}, 1.0, {"a": 7, "b": 9}),
    ({"a": 0, "b": 0}, {"a": 0.6, "b": 0.2}, 10.0, {"a": 0, "b": 16}),
    ({"a": 0, "b": 0}, {"a": 0.6, "b": 0.2}, 0.0, {"a": 8, "b": 8}),
    ({"a": 0, "b": 0}, {"a": 0.0, "b": 0.0}, 1.0, {"a": 8, "b": 8}),
    # usage moves the surplus only: each keeps its 4 deserved GPUs
    ({"a": 4, "b": 4}, {"a": 0.6, "b": 0.2}, 1.0, {"a": 7, "b": 9}),
    ({"a": 4, "b": 4}, {"a": 0.9, "b": 0.0}, 10.0, {"a": 4, "b": 12}),
])
def test_kais_division(deserved, usage, k, shares):
    assert kai_division(16, deserved, {"a": 16, "b": 16}, usage, k) == shares


def test_kais_division_without_usage_is_kai_likes_on_a_varied_demand():
    quotas, demand = {"a": 3, "b": 5, "c": 0, "d": 0}, {"a": 10, "b": 2, "c": 4, "d": 0}
    assert kai_division(16, quotas, demand, dict.fromkeys(quotas, 0.0), 1.0) == \
        team_shares(quotas, demand, 16).fair == {"a": 10, "b": 2, "c": 4, "d": 0}


def view(u: UsageHistory, now: float, half_life: float | None, weight: float = 1.0) -> RoundView:
    return RoundView(now, [8, 8], [], [], {"a": 0, "b": 0}, 16, None, usage=u, usage_half_life_s=half_life,
                     usage_weight=weight)


def test_kai_time_counts_the_last_week_of_usage():
    u = UsageHistory(["a", "b"], half_life_s=None, start_s=0.0)
    u.changed(0.0, "a", 12)
    policy = POLICIES["kai-time"]()
    demand = {"a": 16, "b": 16}
    # a held 3/4 of the cluster all along: W = 1/2, weight max(0, 1/2 + (1/2 - 3/4)) = 1/4 against b's 1
    assert policy.fair_shares(view(u, DAY, None), demand) == {"a": 3, "b": 13}
    assert policy.fair_shares(view(u, DAY, None, weight=0.0), demand) == {"a": 8, "b": 8}
    u.changed(DAY, "a", -12)
    assert policy.fair_shares(view(u, DAY + WINDOW_S, None), demand) == {"a": 8, "b": 8}  # a week later: forgotten
    assert POLICIES["kai-like"]().fair_shares(view(u, DAY, None), demand) == {"a": 8, "b": 8}


def lighter_gets_more_jobs() -> list:
    """a holds both nodes for a day; then a and b each ask for 16 one-GPU jobs."""
    first = [job(f"a-early-{i}", "a", 0, 1, DAY) for i in range(16)]
    later = [job(f"{team}-{i}", team, DAY, 1, 10 * DAY) for team in "ab" for i in range(16)]
    return first + later


@pytest.mark.parametrize("policy, half_life, weight, a_gpus", [
    ("gpu-policy", None, 1.0, 8),                 # no history: 8 and 8
    ("gpu-policy-no-history", DAY, 1.0, 8),       # history kept, not counted
    ("gpu-policy", DAY, 0.0, 8),                  # history counted with weight 0: today's shares
    # U_a = (1 - 1/2) after a day at 16 of 16 GPUs, W = 1/2: a's weight 1/2, b's 1: 16/3 GPUs, rounded
    ("gpu-policy", DAY, 1.0, 5),
])
def test_gpu_policy_with_history_gives_the_lighter_team_more(policy, half_life, weight, a_gpus):
    result = run(policy, lighter_gets_more_jobs(), {"a": 0, "b": 0}, usage_half_life_s=half_life,
                 usage_weight=weight, window=(DAY, DAY + 600.0))
    held = result.ledger.held_gpu_s
    assert held["a"] / 600 == pytest.approx(a_gpus) and held["b"] / 600 == pytest.approx(16 - a_gpus)


def test_entitlement_error_is_the_gap_between_gpu_hours_held_and_the_fair_share():
    # a asks 16 GPUs; its fair share is 16 (b asks nothing) but static holds it to its quota of 8
    jobs = [job(f"a-{i}", "a", 0, 8, 3600) for i in range(2)]
    static = measure(run("static", jobs, {"a": 8, "b": 8}, window=(0.0, 3600.0)))
    assert static.teams["a"].entitlement_error == pytest.approx(0.5)
    assert static.teams["b"].entitlement_error is None  # no demand, no fair share
    assert (static.entitlement_error.mean, static.entitlement_error.worst) == (pytest.approx(0.5), pytest.approx(0.5))
    fifo = measure(run("fifo", jobs, {"a": 8, "b": 8}, window=(0.0, 3600.0)))
    assert fifo.entitlement_error.mean == pytest.approx(0.0)


def test_surplus_per_week_and_who_borrowed_heavily():
    led = Ledger(["a", "b", "c"], {"a": 0, "b": 8, "c": 16}, 100, (0.0, 2 * WEEK_S))
    led.advance(0.0)
    led.held_changed("a", 10)           # 10 of 100 GPUs beyond a quota of 0: 10%
    led.held_changed("b", 12)           # 4 beyond 8: 4%, below the bar of 5%
    led.held_changed("c", 16)           # within its quota
    led.advance(WEEK_S)
    led.held_changed("a", -8)
    led.close(2 * WEEK_S)
    week_h = WEEK_S / 3600
    assert list(led.surplus_gpu_s[0] / 3600) == pytest.approx([10 * week_h, 2 * week_h])
    assert list(led.surplus_gpu_s[1] / 3600) == pytest.approx([4 * week_h, 4 * week_h])
    assert list(led.surplus_gpu_s[2]) == [0, 0]
    heavy = borrowed_heavily(led)
    assert list(heavy) == ["a"]
    assert (heavy["a"].first_week_gpu_h, heavy["a"].second_week_gpu_h) == (pytest.approx(10 * week_h),
                                                                          pytest.approx(2 * week_h))


def test_a_window_shorter_than_a_week_has_no_second_week():
    led = Ledger(["a"], {"a": 0}, 8, (0.0, DAY))
    led.advance(0.0)
    led.held_changed("a", 8)
    led.close(DAY)
    assert borrowed_heavily(led)["a"].second_week_gpu_h is None
    assert led.surplus_gpu_s.shape == (1, 1)


@pytest.mark.parametrize("policy, a_gpus", [("kai-like", 8), ("kai-time", 1)])
def test_kai_time_serves_the_lighter_team_and_the_fair_share_measured_ignores_usage(policy, a_gpus):
    """a held all 16 GPUs for the whole day the cluster existed: to kai-time its usage is 1, its
    weight max(0, 1/2 + (1/2 - 1)) = 0, its fair share 0 and b's 16. Allocation serves the
    least saturated queue first, and a's, at 0 of a fair share of 0, ties b's and starts one
    job; b reclaims it in a later round (not in this window: nothing else happens in it). The
    fair share the ledger measures against is the planner's without usage: 8 each."""
    result = run(policy, lighter_gets_more_jobs(), {"a": 0, "b": 0}, usage_half_life_s=DAY,
                 window=(DAY, DAY + 600.0))
    m = measure(result)
    assert m.teams["a"].mean_fair_share == pytest.approx(8) and m.teams["b"].mean_fair_share == pytest.approx(8)
    assert m.teams["a"].mean_gpus == pytest.approx(a_gpus) and m.teams["b"].mean_gpus == pytest.approx(16 - a_gpus)
    assert all(j.finish is not None for j in result.jobs)


@pytest.mark.parametrize("policy", ["fifo", "kai-like"])
def test_the_history_counts_every_gpu_second_the_ledger_does(policy):
    """Without decay, the history's GPU-hours at the end are the GPU time the run allocated."""
    result = simulate(random_jobs(0), QUOTAS, POLICIES[policy](), SimConfig(nodes=4))
    assert result.usage.half_life_s is None
    used = result.usage.gpu_hours(result.end_s)
    assert {t: used[t] * 3600 for t in QUOTAS} == pytest.approx(result.ledger.held_gpu_s)
    assert sum(result.ledger.held_gpu_s.values()) > 0
