"""Per-model limits (rules/model_limits.py): a queue, with its departments, never holds more
GPUs of one model than its limit after a plan, on small clusters decided whole and on large
ones the greedy scope pools."""

import random
from collections import defaultdict

import pytest

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.planner.core.queues import QueueTree
from tests.planner.random_clusters import rich_scenario

GENEROUS = PlannerConfig(time_limit_s=600.0)


def held_by_model(s, result) -> dict[tuple[str, str], float]:
    """Per (entity, model), the GPUs held after the plan."""
    model = {n.name: n.gpu_model for n in s.nodes}
    queue = {j.name: j.queue for j in s.jobs}
    tree = QueueTree.of(s)
    out: dict[tuple[str, str], float] = defaultdict(float)
    for d in result.jobs:
        if d.action in ("keep", "start", "move"):
            for r in d.replicas:
                for e in tree.path(queue[d.name]):
                    out[e, model[r.node]] += r.gpus
    return out


def before_by_model(s) -> dict[tuple[str, str], float]:
    model = {n.name: n.gpu_model for n in s.nodes}
    tree = QueueTree.of(s)
    out: dict[tuple[str, str], float] = defaultdict(float)
    for j in s.jobs:
        for node in j.running:
            for e in tree.path(j.queue):
                out[e, model[node]] += j.gpus
    return out


def assert_within_limits(s, result):
    after, before = held_by_model(s, result), before_by_model(s)
    for q in s.queues:
        for m, quota in q.models.items():
            assert after[q.name, m] <= max(quota.limit, before[q.name, m]) + 1e-6, (q.name, m, after[q.name, m])


@pytest.mark.parametrize("seed", range(40))
def test_random_clusters_with_model_limits_stay_within_them(seed):
    """Rich random clusters with two GPU models, each queue given a random limit on one."""
    rng = random.Random(seed)
    data = rich_scenario(seed)
    for i, node in enumerate(data["nodes"]):
        node["gpu_model"] = "A" if i % 2 else "B"
    for q in data["queues"]:
        if rng.random() < 0.7:
            q["models"] = {rng.choice("AB"): {"limit": rng.choice([0, 1, 2, 4])}}
    for j in data["jobs"]:
        j.pop("gpu_model", None)
    s = parse_scenario(data)
    assert_within_limits(s, plan(s, GENEROUS))


def test_a_large_cluster_places_a_limited_queue_on_the_other_model():
    """40 nodes (past `exact_nodes`, so the greedy scope pools them): team-a is at its limit of
    H100s, and its waiting jobs start on A100s though H100s are free; team-b's take the H100s."""
    nodes = [{"name": f"h{i}", "gpus": 8, "gpu_model": "H100"} for i in range(20)]
    nodes += [{"name": f"a{i}", "gpus": 8, "gpu_model": "A100"} for i in range(20)]
    jobs = [{"name": f"a-run-{i}", "queue": "team-a", "gpus": 8, "running": [f"h{i}"]} for i in range(4)]
    jobs += [{"name": f"a-new-{i}", "queue": "team-a", "gpus": 8} for i in range(6)]
    jobs += [{"name": f"b-new-{i}", "queue": "team-b", "gpus": 8} for i in range(6)]
    s = parse_scenario({"nodes": nodes, "jobs": jobs, "queues": [
        {"name": "team-a", "deserved": 160, "models": {"H100": {"limit": 32}}}, {"name": "team-b", "deserved": 160}]})
    result = plan(s, GENEROUS)
    assert_within_limits(s, result)
    assert all(result.job(f"a-new-{i}").action == "start" for i in range(6))
    assert {r.node[0] for i in range(6) for r in result.job(f"a-new-{i}").replicas} == {"a"}


def test_a_limit_below_what_a_queue_holds_preempts_nothing():
    s = parse_scenario({"nodes": [{"name": "h", "gpus": 8, "gpu_model": "H100"}],
                        "queues": [{"name": "a", "deserved": 8, "models": {"H100": {"limit": 2}}}],
                        "jobs": [{"name": "run", "queue": "a", "gpus": 4, "running": ["h"]},
                                 {"name": "next", "queue": "a", "gpus": 2}]})
    result = plan(s, GENEROUS)
    assert result.job("run").action == "keep"
    assert result.job("next").action == "wait" and result.job("next").code == "ModelLimit"
