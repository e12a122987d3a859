"""Fair share over time (planner/core/fair_share.py, `usage_weights`): past usage lowers a
queue's part of the surplus beyond deserved, never its guarantee; with no usage, or weight 0,
the division is exactly the one without it."""

import json
import math
import random

import pytest

from gpu_policy import parse_scenario, plan
from gpu_policy.planner.core.fair_share import fair_shares, queue_demands, queue_usage, usage_fractions, usage_weights
from gpu_policy.presentation.render import queue_table
from tests.planner.random_clusters import random_queues, rich_scenario


WEEK = 604800


def with_usage(raw: dict, seed: int, weight: float = 1.0) -> dict:
    """The cluster `raw` with past usage on most of its queues: each up to the decayed
    GPU-hours of the whole cluster busy all along (more, now and then)."""
    rng = random.Random(seed + 10_000)
    whole = sum(n["gpus"] for n in raw["nodes"]) * WEEK / math.log(2) / 3600
    for q in raw["queues"]:
        if rng.random() < 0.7:
            q["usage_gpu_h"] = whole * rng.choice([0.1, 0.5, 1, 2]) * rng.random()
    raw["policy"] = {"usage_half_life_s": WEEK, "usage_weight": weight}
    return raw


def contended(seed: int, weight: float = 1.0) -> dict:
    """Queues (some in departments, some in a higher tier, some with limits or weight 0) asking
    for more than the cluster has, each with past usage: where the division of the surplus
    matters."""
    rng = random.Random(seed)
    queues = random_queues(rng, [0, 1, 2], (2, 6))
    jobs = [{"name": f"{q['name']}-j", "queue": q["name"], "gpus": 1, "replicas": rng.randint(1, 30)}
            for q in queues if q["name"].startswith("q")]
    nodes = [{"name": f"n{i}", "gpus": 8} for i in range(rng.randint(2, 6))]
    return with_usage({"nodes": nodes, "queues": queues, "jobs": jobs}, seed, weight)


def test_no_usage_or_no_weight_gives_the_plain_weights():
    assert usage_weights([1, 3], [0, 0], 1.0) == [1, 3]
    assert usage_weights([1, 3], [10, 0], 0.0) == [1, 3]


@pytest.mark.parametrize("busy", [1.0, 0.5, 0.1])
def test_usage_in_proportion_to_weight_changes_no_proportion(busy):
    """Usage split as the weights are, on a cluster that was busy or idle, divides the surplus
    as the weights do."""
    out = usage_weights([1, 3], [0.25 * busy, 0.75 * busy], 1.0)
    assert out[1] == pytest.approx(3 * out[0])


def test_heavier_user_gets_less_and_weights_add_up_to_at_least_one():
    out = usage_weights([1, 1, 1], [0.6, 0.3, 0.1], 1.0)
    assert out[0] < out[1] < out[2]
    assert sum(out) == pytest.approx(1.0)
    assert sum(usage_weights([1, 1, 1], [0.3, 0.1, 0.0], 1.0)) > 1


def test_weight_never_below_zero():
    out = usage_weights([1, 1], [1.0, 0], 5.0)
    assert out[0] == 0 and out[1] > 0


def test_a_queue_that_held_x_gpus_all_along_used_x_of_them():
    hours_per_gpu = WEEK / math.log(2) / 3600
    assert usage_fractions([6 * hours_per_gpu, 2 * hours_per_gpu], 8, WEEK) == pytest.approx([0.75, 0.25])


def test_usage_beyond_what_the_gpus_could_give_adds_up_to_one():
    """A department whose share shrank: its queues used more than its GPUs could have given."""
    assert usage_fractions([3000, 1000], 2, WEEK) == pytest.approx([0.75, 0.25])


def test_a_department_uses_what_its_queues_used():
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 4}],
                        "queues": [{"name": "d", "usage_gpu_h": 1}, {"name": "a", "parent": "d", "usage_gpu_h": 2},
                                   {"name": "b", "parent": "d", "usage_gpu_h": 3}, {"name": "c"}],
                        "jobs": []})
    assert queue_usage(s) == {"d": 6, "a": 2, "b": 3, "c": 0}


@pytest.mark.parametrize("seed", range(60))
def test_usage_keeps_guarantees_and_hands_out_the_same_gpus(seed):
    """On random clusters with departments, tiers, weights 0-2 and limits: each share stays at
    or above min(deserved, demand) rounded up, and the GPUs handed out add up to what the
    division without usage hands out."""
    s = parse_scenario(contended(seed))
    demands = queue_demands(s)
    counted = fair_shares(s, demands=demands)
    plain = fair_shares(s, demands=demands, with_usage=False)
    for q in s.queues:
        assert counted[q.name] >= math.ceil(min(q.deserved, demands[q.name].total) - 1e-9), q.name
    top = [q.name for q in s.queues if q.parent is None]
    assert sum(counted[n] for n in top) == sum(plain[n] for n in top)


@pytest.mark.parametrize("seed", range(60))
def test_weight_zero_is_the_division_without_usage(seed):
    s = parse_scenario(contended(seed, weight=0.0))
    assert fair_shares(s) == fair_shares(s, with_usage=False)


@pytest.mark.parametrize("used", [0, 5, 20, 1000])
def test_the_lighter_of_two_twins_gets_more(used):
    """Two queues alike in all but usage (the 13 GPUs busy all along make 18.8 decayed
    GPU-hours with this half-life): the one that used less gets more."""
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 13}], "policy": {"usage_half_life_s": 3600},
                        "queues": [{"name": "heavy", "deserved": 2, "usage_gpu_h": used + 5},
                                   {"name": "light", "deserved": 2, "usage_gpu_h": used}],
                        "jobs": [{"name": "h", "queue": "heavy", "gpus": 1, "replicas": 13},
                                 {"name": "l", "queue": "light", "gpus": 1, "replicas": 13}]})
    shares = fair_shares(s)
    assert shares["light"] > shares["heavy"] >= 2


def test_the_plan_reports_usage_wherever_the_policy_keeps_it():
    raw = with_usage(rich_scenario(3), 3)
    counted = plan(parse_scenario(raw)).to_dict()
    raw["policy"]["usage_weight"] = 0  # kept, counting for nothing: shown, and the two fair shares one
    weightless = plan(parse_scenario(raw)).to_dict()
    del raw["policy"]
    plain = plan(parse_scenario(raw)).to_dict()
    assert all(q["usage_gpu_h"] is not None and q["fair_share_without_usage"] is not None for q in counted["queues"])
    assert [q["usage_gpu_h"] for q in weightless["queues"]] == [q["usage_gpu_h"] for q in counted["queues"]]
    assert any(q["usage_gpu_h"] for q in weightless["queues"])
    assert all(q["fair_share_without_usage"] == q["fair_share"] for q in weightless["queues"])
    assert all(q["usage_gpu_h"] is None and q["fair_share_without_usage"] is None for q in plain["queues"])
    json.dumps(counted)


def test_the_table_shows_usage_columns_only_where_it_counts():
    raw = with_usage(rich_scenario(3), 3)
    assert "USAGE GPU-H" in queue_table(plan(parse_scenario(raw)))
    del raw["policy"]
    assert "USAGE GPU-H" not in queue_table(plan(parse_scenario(raw)))


def test_reasons_say_what_usage_changed():
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 8}], "policy": {"usage_half_life_s": 3600},
                        "queues": [{"name": "a", "usage_gpu_h": 300}, {"name": "b", "usage_gpu_h": 100}],
                        "jobs": [{"name": f"{q}-{i}", "queue": q, "gpus": 2} for q in "ab" for i in range(4)]})
    waits = [d.reason for d in plan(s).jobs if d.action == "wait" and d.queue == "a"]
    assert waits and all("fair share of 2 (4 without its past usage)" in r for r in waits)


def test_usage_changes_shares_on_many_random_clusters():
    """The properties above are not vacuous: on many of the clusters usage moves GPUs."""
    changed = sum(fair_shares(s) != fair_shares(s, with_usage=False)
                  for s in (parse_scenario(contended(seed)) for seed in range(60)))
    assert changed >= 12
