"""Every plan keeps the invariants of tests/planner/checker.py, on seeded random clusters
small enough to be decided whole and large enough to be pooled."""

import pytest

from gpu_policy import parse_scenario, plan
from gpu_policy.actions.cycle import plan_with_telemetry
from tests.planner.checker import check_plan
from tests.planner.composable_clusters import composable_scenario
from tests.planner.random_clusters import random_scenario, rich_scenario

CASES = [(seed, (2, 5), (4, 14)) for seed in range(25)]
# clusters above PlannerConfig.exact_nodes: pooled nodes, greedy reclaim candidates
CASES += [(seed, (20, 40), (40, 90)) for seed in range(100, 108)]


@pytest.mark.parametrize("seed,nodes,jobs", CASES)
def test_invariants(seed, nodes, jobs):
    s = parse_scenario(random_scenario(seed, nodes, jobs))
    check_plan(s, plan(s))


@pytest.mark.parametrize("seed", range(0, 200, 4))
def test_invariants_with_every_feature(seed):
    s = parse_scenario(rich_scenario(seed))
    check_plan(s, plan(s))


@pytest.mark.parametrize("seed", range(0, 200, 4))
def test_invariants_of_composable_clusters(seed):
    """GPU composition, with simulated telemetry: attaches within max_gpus and the pool,
    detaches only what composition attached, replicas on the GPUs the nodes have after."""
    s = parse_scenario(composable_scenario(seed))
    check_plan(s, plan_with_telemetry(s))


def test_the_checker_catches_a_broken_plan():
    s = parse_scenario(random_scenario(3))
    result = plan(s)
    started = next(d for d in result.jobs if d.action == "start")
    started.replicas = started.replicas[:-1] if len(started.replicas) > 1 else []
    with pytest.raises(AssertionError, match="gang of"):
        check_plan(s, result)
