"""Invariants on seeded random clusters: capacity, gangs, non-preemptible work, moves."""

from collections import defaultdict

import pytest

from gpu_policy import PlannerConfig, parse_scenario, plan
from tests.planner.random_clusters import random_scenario


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
