"""The planner honours placement constraints wherever it places a replica: starts, moves,
gangs, fractions, on small clusters (exact) and large ones (greedy scope, pooled nodes)."""

import random

import pytest

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.model.apply import apply_plan
from tests.planner.checker import check_plan
from tests.planner.random_clusters import random_scenario

EXACT, GREEDY = PlannerConfig(), PlannerConfig(exact_nodes=1)


def zones(*zone_of_node, gpus=8, **node) -> list[dict]:
    return [{"name": f"node-{i + 1}", "gpus": gpus, "labels": {"zone": z}, **node} for i, z in enumerate(zone_of_node)]


def acts(result) -> dict[str, str]:
    return {j.name: j.action for j in result.jobs}


@pytest.mark.parametrize("cfg", [EXACT, GREEDY], ids=["exact", "greedy"])
def test_a_job_is_not_moved_where_its_selector_forbids(cfg):
    """Moving small to node-2's 4 free GPUs would make room for big; small selects zone a."""
    s = parse_scenario({
        "nodes": zones("a", "b"), "queues": [{"name": "q", "deserved": 16}],
        "jobs": [{"name": "small", "queue": "q", "gpus": 4, "running": ["node-1"], "node_selector": {"zone": "a"}},
                 {"name": "fixed", "queue": "q", "gpus": 4, "priority": 100, "running": ["node-2"]},
                 {"name": "big", "queue": "q", "gpus": 8, "submitted_at": 5}]})
    assert acts(plan(s, cfg)) == {"small": "keep", "fixed": "keep", "big": "wait"}
    s.jobs[0].node_selector = {}
    assert acts(plan(s, cfg)) == {"small": "move", "fixed": "keep", "big": "start"}


@pytest.mark.parametrize("cfg", [EXACT, GREEDY], ids=["exact", "greedy"])
def test_every_replica_of_a_gang_lands_where_it_may(cfg):
    s = parse_scenario({
        "nodes": zones("a", "b", "a", "b"), "queues": [{"name": "q", "deserved": 32}],
        "jobs": [{"name": "gang", "queue": "q", "gpus": 8, "replicas": 2, "node_selector": {"zone": "b"}},
                 {"name": "too-big", "queue": "q", "gpus": 8, "replicas": 3, "node_selector": {"zone": "a"}}]})
    result = plan(s, cfg)
    assert sorted(r.node for r in result.job("gang").replicas) == ["node-2", "node-4"]
    assert result.job("too-big").action == "wait"
    assert result.job("too-big").reason == \
        "can never fit: a gang of 3 replicas x 8 GPUs is more than the nodes it may use hold"


@pytest.mark.parametrize("cfg", [EXACT, GREEDY], ids=["exact", "greedy"])
def test_fractions_and_pooled_nodes_respect_taints(cfg):
    nodes = zones("a", "a", "a") + [{"name": "node-4", "gpus": 8,
                                     "taints": [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]}]
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    s = parse_scenario({
        "nodes": nodes, "queues": [{"name": "q", "deserved": 32}],
        "jobs": [{"name": "frac", "queue": "q", "gpus": 0.5, "tolerations": tolerate,
                  "node_affinity": [{"match_fields": [{"key": "metadata.name", "operator": "In", "values": ["node-4"]}]}]},
                 *[{"name": f"w-{i}", "queue": "q", "gpus": 8, "submitted_at": i} for i in range(4)],
                 {"name": "tol", "queue": "q", "gpus": 4, "tolerations": tolerate, "submitted_at": 9}]})
    result = plan(s, cfg)
    assert result.job("frac").replicas[0].node == "node-4"
    started = {j.name: j.replicas[0].node for j in result.jobs if j.action == "start"}
    assert all(node != "node-4" for name, node in started.items() if name.startswith("w-"))
    assert [j.name for j in result.jobs if j.action == "wait"] == ["w-3"]
    assert started["tol"] == "node-4"


def test_a_model_and_a_selector_no_node_meets_together():
    s = parse_scenario({
        "nodes": [{"name": "h", "gpus": 8, "gpu_model": "H100", "labels": {"zone": "a"}},
                  {"name": "l", "gpus": 8, "gpu_model": "L40S", "labels": {"zone": "b"}}],
        "queues": [{"name": "q", "deserved": 16}],
        "jobs": [{"name": "j", "queue": "q", "gpus": 1, "gpu_model": "H100", "node_selector": {"zone": "b"}}]})
    assert plan(s).job("j").reason == \
        "can never fit: no node its placement constraints allow has GPU model H100"


def test_a_refused_job_does_not_count_as_a_claim_that_starts():
    s = parse_scenario({
        "nodes": [{"name": "n", "gpus": 8}],
        "queues": [{"name": "q", "deserved": 8, "namespaces": ["ml"]}],
        "jobs": [{"name": "web/j", "queue": "q", "gpus": 1}, {"name": "j", "queue": "q", "gpus": 1}]})
    result = plan(s)
    assert result.job("web/j").reason == "not admitted: namespace web may not use queue q"
    assert result.job("j").reason == "not admitted: a job with no namespace may not use queue q"
    assert result.summary["starts"] == 0
    again = plan(apply_plan(s, result))
    assert acts(again) == {"web/j": "wait", "j": "wait"}


def constrained(seed: int, nodes: tuple[int, int], jobs: tuple[int, int]) -> dict:
    """A random cluster (tests/planner/random_clusters.py) with zones on its nodes, a taint on
    some, and selectors, affinity and tolerations on some waiting jobs."""
    rng = random.Random(seed)
    data = random_scenario(seed, nodes, jobs)
    for n in data["nodes"]:
        n["labels"] = {"zone": rng.choice("ab")}
        if rng.random() < 0.2:
            n["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    for j in data["jobs"]:
        if j.get("running"):
            continue
        roll = rng.random()
        if roll < 0.25:
            j["node_selector"] = {"zone": rng.choice("ab")}
        elif roll < 0.4:
            j["node_affinity"] = [{"match_fields": [{"key": "metadata.name", "operator": "In",
                                                     "values": [rng.choice(data["nodes"])["name"]]}]}]
        if rng.random() < 0.3:
            j["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return data


@pytest.mark.parametrize("seed", range(12))
def test_small_constrained_clusters_keep_every_invariant_and_settle(seed):
    s = parse_scenario(constrained(seed, (2, 5), (4, 14)))
    result = plan(s)
    check_plan(s, result)
    again = plan(apply_plan(s, result))
    assert [(j.name, j.action) for j in again.jobs if j.action not in ("keep", "wait")] == []


@pytest.mark.parametrize("seed", range(100, 104))
def test_large_constrained_clusters_keep_every_invariant(seed):
    """Pooled nodes and greedy reclaim (large random clusters do not all settle in two plans,
    with or without constraints: not asserted here)."""
    s = parse_scenario(constrained(seed, (20, 40), (40, 90)))
    check_plan(s, plan(s))
