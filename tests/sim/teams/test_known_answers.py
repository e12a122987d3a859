"""The seed's problems over time, on traces small enough to know every answer.

Two nodes of 8 GPUs and two teams deserving 8 each, unless a test says otherwise.
Rounds fall every 300 s, and at once when nothing runs.
"""

import pytest

from gpu_policy.sim.teams import measure
from tests.sim.teams.conftest import by_name, job, run

QUOTAS = {"a": 8, "b": 8}
H = 3600.0


def greedy_team():
    """Team a fills the cluster while b is away; b arrives at t=1000 with 8 jobs."""
    return ([job(f"a-{i:02d}", "a", 0, 1, 100_000) for i in range(16)]
            + [job(f"b-{i}", "b", 1000, 1, 10_000) for i in range(8)])


@pytest.mark.parametrize("policy", ["static", "kai-like", "gpu-policy"])
def test_greedy_team_gives_back_at_the_next_round(policy):
    jobs = by_name(run(policy, greedy_team(), QUOTAS))
    for i in range(8):
        b = jobs[f"b-{i}"]
        assert b.first_start == 1200 and b.waited_s == 200          # the round after 1000
        assert b.finish == 11_200
    a_started = sorted(j.first_start for n, j in jobs.items() if n.startswith("a-"))
    # static holds a to its quota: its other 8 start when its first 8 finish
    assert a_started == [0.0] * 8 + ([0.0] * 8 if policy != "static" else [100_000.0] * 8)


@pytest.mark.parametrize("policy", ["kai-like", "gpu-policy"])
def test_greedy_teams_victims_lose_their_work_since_the_start(policy):
    result = run(policy, greedy_team(), QUOTAS)
    victims = [j for j in result.jobs if j.preemptions]
    assert len(victims) == 8 and all(j.team == "a" for j in victims)
    # preempted at t=1200, before their first checkpoint at 1800: 1200 s of work and the 60 s restart each
    assert sum(j.lost_gpu_s for j in result.jobs) == pytest.approx(8 * 1260)
    for v in victims:  # b's jobs finish at 11,200: back at the next round, 60 s to restart, all 100,000 s again
        assert v.first_start == 0 and v.finish == pytest.approx(11_400 + 60 + 100_000)


def test_fifo_lets_the_greedy_team_keep_everything():
    jobs = by_name(run("fifo", greedy_team(), QUOTAS))
    assert all(jobs[f"b-{i}"].first_start == 100_000 for i in range(8))
    assert not any(j.preemptions for j in jobs.values())


def idle_owner():
    """Team a is idle; b wants 16 GPUs from t=0; a comes back at t=5000 with 4 jobs."""
    return ([job(f"b-{i:02d}", "b", 0, 1, 50_000) for i in range(16)]
            + [job(f"a-{i}", "a", 5000, 1, 1000) for i in range(4)])


@pytest.mark.parametrize("policy, b_running, a_start", [
    ("static", 8, 5100),        # a's share sat idle for 5,000 s, so a starts at once
    ("fifo", 16, 50_000),       # b borrowed it all and nothing gives it back
    ("kai-like", 16, 5100),     # b borrowed a's idle share and gives 4 GPUs back at the next round
    ("gpu-policy", 16, 5100),
])
def test_an_idle_share_is_lent_and_its_owner_gets_it_back(policy, b_running, a_start):
    result = run(policy, idle_owner(), QUOTAS)
    jobs = by_name(result)
    assert sum(1 for n, j in jobs.items() if n.startswith("b-") and j.first_start == 0) == b_running
    assert [jobs[f"a-{i}"].first_start for i in range(4)] == [a_start] * 4
    assert sum(j.preemptions for j in jobs.values()) == (4 if policy in ("kai-like", "gpu-policy") else 0)


def fragmented():
    """Four 4-GPU jobs pack two nodes, best fit in arrival (then name) order:
    node 0 = a-0-short, a-1-long; node 1 = a-2-short, a-3-long. The short ones
    finish at 1000, leaving 4 GPUs free on each node; an 8-GPU job arrives at 1450."""
    return [job("a-0-short", "a", 0, 4, 1000), job("a-1-long", "a", 0, 4, 100_000),
            job("a-2-short", "a", 0, 4, 1000), job("a-3-long", "a", 0, 4, 100_000),
            job("a-big", "a", 1450, 8, 2000)]


@pytest.mark.parametrize("policy, start, moves", [
    ("static", 100_000, 0), ("fifo", 100_000, 0),      # waits for a node to empty
    ("kai-like", 1500, 1), ("gpu-policy", 1500, 1),    # one 4-GPU job moves beside the other
])
def test_an_8_gpu_job_behind_fragmentation(policy, start, moves):
    result = run(policy, fragmented(), {"a": 16, "b": 0})
    jobs = by_name(result)
    assert jobs["a-big"].first_start == start
    assert sum(j.moves for j in jobs.values()) == moves
    if moves:  # the moved job loses 1500 s of work (no checkpoint yet) and restarts: 4 GPUs x 1560 s
        moved = next(j for j in jobs.values() if j.moves)
        assert moved.name.endswith("-long") and moved.lost_gpu_s == pytest.approx(4 * 1560)
        assert moved.finish == pytest.approx(1500 + 60 + 100_000)


@pytest.mark.parametrize("policy", ["kai-like", "gpu-policy"])
@pytest.mark.parametrize("every, lost_work, finish", [
    (1800.0, 4200 - 3600, 5200 + 60 + (10_000 - 3600)),   # back to the checkpoint at 3,600
    (1000.0, 4200 - 4000, 5200 + 60 + (10_000 - 4000)),
    (None, 4200, 5200 + 60 + 10_000),                      # never checkpointed: starts over
])
def test_a_checkpointed_victim_loses_exactly_its_work_since_the_checkpoint(policy, every, lost_work, finish):
    """Team a borrows the only node; b's job arrives at 4000 and reclaims it at 4200."""
    jobs = [job("a-borrow", "a", 0, 8, 10_000), job("b-own", "b", 4000, 8, 1000)]
    result = run(policy, jobs, {"a": 0, "b": 8}, nodes=1, checkpoint_every_s=every)
    a, b = by_name(result)["a-borrow"], by_name(result)["b-own"]
    assert b.first_start == 4200 and b.finish == 5200
    assert a.preemptions == 1 and a.lost_gpu_s == pytest.approx(8 * (lost_work + 60))
    assert a.finish == pytest.approx(finish)          # restarted at once when b's job left the node empty
    assert sum(result.ledger.lost_gpu_s.values()) == pytest.approx(8 * (lost_work + 60))


def two_victims():
    """Team a borrows 8 GPUs with two 4-GPU jobs: x started at 0 (checkpointed at
    1800), y at 1500 (no checkpoint yet). b's 4-GPU job reclaims at 2100."""
    return [job("a-x", "a", 0, 4, 50_000), job("a-y", "a", 1500, 4, 50_000), job("b-0", "b", 1990, 4, 1000)]


@pytest.mark.parametrize("policy, victim, lost_work", [
    ("gpu-policy", "a-x", 2100 - 1800),   # least work lost: x checkpointed 300 s ago, y has 600 s unsaved
    ("kai-like", "a-y", 2100 - 1500),     # the youngest job
])
def test_victims_by_lost_work_or_by_age(policy, victim, lost_work):
    result = run(policy, two_victims(), {"a": 0, "b": 8}, nodes=1)
    jobs = by_name(result)
    assert [n for n, j in jobs.items() if j.preemptions] == [victim]
    assert jobs[victim].lost_gpu_s == pytest.approx(4 * (lost_work + 60))


def test_a_job_arriving_on_an_idle_cluster_starts_at_once():
    jobs = [job("a-0", "a", 7, 1, 1000), job("a-1", "a", 50, 1, 100), job("a-2", "a", 1500, 1, 100)]
    jobs = by_name(run("fifo", jobs, QUOTAS))
    assert jobs["a-0"].first_start == 7        # nothing ran: a round at once
    assert jobs["a-1"].first_start == 300      # a-0 runs: the next round on the grid
    assert jobs["a-2"].first_start == 1500     # the cluster is empty again at 1,007


def test_quota_less_teams_never_run_under_static_and_borrow_elsewhere():
    jobs = [job("c-0", "c", 0, 1, 100)]
    assert by_name(run("static", jobs, {"c": 0}))["c-0"].first_start is None
    assert by_name(run("kai-like", jobs, {"c": 0}))["c-0"].finish == 100


@pytest.mark.parametrize("policy, longest", [("fifo", 100_000 - 1200), ("kai-like", 0), ("gpu-policy", 0)])
def test_the_guarantee_is_judged_from_the_round_that_could_have_kept_it(policy, longest):
    """b is owed GPUs from the first round after its arrival (1200) until it starts:
    under fifo when a's jobs finish at 100,000; never under the reclaiming policies."""
    result = run(policy, greedy_team(), QUOTAS)
    m = measure(result)
    assert m.teams["b"].longest_below_guarantee_s == longest
    assert m.teams["b"].guarantee_share == pytest.approx(1 - longest / result.end_s)
    assert m.teams["a"].guarantee_share == 1.0      # a holds 8 = its quota: a 9th GPU is not owed
    assert m.longest_below_guarantee_s == longest and m.guarantee_share == m.teams["b"].guarantee_share
