"""Invariants of whole runs on seeded random traces, for every policy: no node
over capacity, every job finishes exactly once, GPU time conserved."""

import numpy as np
import pytest

from gpu_policy.sim.teams import POLICIES, SimConfig, simulate
from gpu_policy.sim.teams.jobs import Decision, PolicyViolation
from gpu_policy.sim.teams.stopping import KUBERNETES
from gpu_policy.sim.teams.trace import GPUS_PER_NODE
from tests.sim.teams.conftest import job

QUOTAS = {"a": 16, "b": 8, "c": 8, "d": 0}


def random_jobs(seed: int, count: int = 60) -> list:
    rng = np.random.default_rng(seed)
    sizes = [1, 1, 1, 2, 4, 8, 12, 16]
    return [job(f"j{i:03d}", str(rng.choice(list(QUOTAS))), float(rng.integers(0, 30_000)),
                int(rng.choice(sizes)), float(np.round(rng.lognormal(7.5, 1.2), 1)) + 1)
            for i in range(count)]


class Audited:
    """Wraps a policy and checks, before each round, that the cluster the engine
    shows agrees with where its running jobs are."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.eviction = inner.eviction
        self.rounds = 0

    def decide(self, view):
        used = [0] * len(view.free)
        for j in view.running:
            for n in j.nodes:
                used[n] += j.spec.gpus_per_replica
        assert [GPUS_PER_NODE - u for u in used] == view.free
        assert all(0 <= room <= GPUS_PER_NODE for room in view.free)
        self.rounds += 1
        return self.inner.decide(view)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("policy", list(POLICIES))
def test_whole_runs_keep_capacity_finish_every_job_once_and_conserve_gpu_time(policy, seed):
    jobs = random_jobs(seed)
    audited = Audited(POLICIES[policy]())
    # an hour's half-life: gpu-policy and kai-time count history, gpu-policy-no-history does not
    result = simulate(jobs, QUOTAS, audited, SimConfig(nodes=4, usage_half_life_s=3600.0))
    assert audited.rounds == result.rounds > 0
    assert sorted(j.name for j in result.jobs) == sorted(j.name for j in jobs)
    never = {j.name for j in result.jobs if j.finish is None}
    # static never runs a job larger than its team's quota (team d has none); every other job
    # finishes, once (finish is set once, never reset)
    assert never == ({j.name for j in jobs if j.held_gpus > QUOTAS[j.team]} if policy == "static" else set())
    for j in result.jobs:
        if j.finish is not None:
            assert j.spec.arrival_s <= j.first_start <= j.finish and j.nodes is None
            run_time = j.finish - j.spec.arrival_s - j.waited_s
            assert run_time * j.gpus == pytest.approx(j.spec.duration_s * j.gpus + j.lost_gpu_s)
    # the GPU time allocated is exactly the jobs' work plus what preemptions and moves lost
    finished = [j for j in result.jobs if j.finish is not None]
    allocated = sum(result.ledger.held_gpu_s.values())
    assert allocated == pytest.approx(sum(j.gpus * j.spec.duration_s + j.lost_gpu_s for j in finished))
    assert sum(result.ledger.lost_gpu_s.values()) == pytest.approx(sum(j.lost_gpu_s for j in result.jobs))
    if policy in ("static", "fifo"):
        assert not any(j.preemptions or j.moves for j in result.jobs)


def test_a_policy_that_overfills_a_node_is_stopped():
    class Greedy:
        name = "greedy"
        eviction = KUBERNETES

        def decide(self, view):
            return Decision(start={j.name: (0,) for j in view.waiting})

    with pytest.raises(PolicyViolation, match=r"greedy: node 0 over capacity at t=0 \(9 of 8 GPUs\)"):
        simulate([job("x", "a", 0, 8, 10), job("y", "a", 0, 1, 10)], QUOTAS, Greedy(), SimConfig(nodes=1))


def test_skipped_rounds_would_not_have_acted():
    """Rounds in which nothing changed are skipped on the grounds that a stable
    policy decides nothing new in them. Planning every round instead, count the
    rounds with no arrival, finish, preemption or move since the last one that
    still acted: for the planner and kai-like there are none on these traces."""
    for policy in ("kai-like", "gpu-policy"):
        for seed in (0, 1, 2):
            every = simulate(random_jobs(seed), QUOTAS, POLICIES[policy](), SimConfig(nodes=4,
                             skip_unchanged_rounds=False))
            skipped = simulate(random_jobs(seed), QUOTAS, POLICIES[policy](), SimConfig(nodes=4))
            print(f"{policy} seed {seed}: {every.rounds} rounds planned, {skipped.rounds} when skipping; "
                  f"{every.acted_unchanged} unchanged rounds acted")
            assert every.rounds > skipped.rounds
            assert every.acted_unchanged == 0
            assert [j.finish for j in every.jobs] == [j.finish for j in skipped.jobs]
