"""Invariants on seeded random clusters: capacity, gangs, non-preemptible work, moves."""

import random
from collections import defaultdict

import pytest

from gpu_policy import PlannerConfig, parse_scenario, plan


def random_scenario(seed: int, nodes_range: tuple[int, int] = (2, 5), jobs_range: tuple[int, int] = (4, 14)) -> dict:
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "gpus": rng.choice([4, 8]), "cpu": 64} for i in range(rng.randint(*nodes_range))]
    queues = [{"name": f"q{i}", "deserved": rng.randint(0, 8), "over_quota_weight": rng.choice([0, 1, 2])}
              for i in range(3)]
    free = {n["name"]: n["gpus"] for n in nodes}
    cpu = {n["name"]: 64 for n in nodes}
    jobs = []
    for i in range(rng.randint(*jobs_range)):
        gpus = rng.choice([0.5, 1, 2, 4])
        replicas = rng.choice([1, 1, 2])
        job = {"name": f"j{i}", "queue": rng.choice(queues)["name"], "gpus": gpus, "replicas": replicas,
               "priority": rng.choice([10, 50, 50, 100]), "submitted_at": i, "cpu": rng.choice([1, 8])}
        hosts = [n for n in free if free[n] >= gpus and cpu[n] >= job["cpu"]]
        if rng.random() < 0.5 and hosts and gpus >= 1:
            where = [rng.choice(hosts) for _ in range(replicas)]
            if all(free[w] >= gpus * where.count(w) and cpu[w] >= job["cpu"] * where.count(w) for w in set(where)):
                for w in where:
                    free[w] -= gpus
                    cpu[w] -= job["cpu"]
                job["running"] = where
        jobs.append(job)
    return {"nodes": nodes, "queues": queues, "jobs": jobs}


CASES = [(seed, (2, 5), (4, 14)) for seed in range(25)]
# clusters above PlannerConfig.exact_nodes: candidate nodes are pruned and reserved greedily
CASES += [(seed, (20, 40), (40, 90)) for seed in range(100, 108)]


@pytest.mark.parametrize("seed,nodes,jobs", CASES)
def test_invariants(seed, nodes, jobs):
    s = parse_scenario(random_scenario(seed, nodes, jobs))
    # a short stage limit: a plan cut off by its time limit must keep every invariant too
    result = plan(s, PlannerConfig(time_limit_s=2))
    jobs = {j.name: j for j in s.jobs}
    per_gpu = defaultdict(float)
    cpu = defaultdict(float)
    for d in result.jobs:
        job = jobs[d.name]
        if d.action in ("keep", "start", "move"):
            assert len(d.replicas) == job.replicas  # gangs all or nothing
            for r in d.replicas:
                cpu[r.node] += job.cpu or 0
                for i in r.gpu_indices:
                    per_gpu[r.node, i] += job.gpus if job.is_fractional else 1
        if d.action in ("preempt", "move"):
            assert job.is_preemptible, d.name
        if d.action == "wait":
            assert d.reason
    nodes = {n.name: n for n in s.nodes}
    for (node, i), used in per_gpu.items():
        assert i < nodes[node].gpus and used <= 1 + 1e-9, (node, i, used)
    for node, used in cpu.items():
        assert used <= nodes[node].cpu
    assert result.summary["moves"] <= PlannerConfig().max_moves
