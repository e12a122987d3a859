"""Fair share: deserved first, tiers, weights with water-filling, limits, rounding."""

from gpu_policy import fair_shares, parse_scenario
from gpu_policy.planner.core.fair_share import round_largest_remainder, split_capacity


def shares(nodes_gpus, queues, jobs):
    return fair_shares(parse_scenario({
        "nodes": [{"name": f"n{i}", "gpus": g} for i, g in enumerate(nodes_gpus)],
        "queues": queues,
        "jobs": [{"name": f"j{i}", "queue": q, "gpus": 1, "replicas": r} for i, (q, r) in enumerate(jobs)],
    }))


def test_water_filling_redistributes_what_a_queue_cannot_use():
    # surplus 6 at weights 1:2:3; c wants only 1 more, the rest is divided again 1:2
    out = split_capacity(9, [(1, 10, 1, 0), (1, 10, 2, 0), (1, 2, 3, 0)])
    assert [round(x, 6) for x in out] == [round(1 + 5 / 3, 6), round(1 + 10 / 3, 6), 2]


def test_higher_tier_takes_surplus_first():
    out = split_capacity(10, [(2, 10, 1, 1), (2, 10, 5, 0)])
    assert out == [8, 2]


def test_weight_zero_gets_no_surplus():
    assert split_capacity(10, [(2, 10, 0, 0), (2, 5, 1, 0)]) == [2, 5]


def test_deserved_never_cut_when_overcommitted():
    assert split_capacity(8, [(8, 8, 1, 0), (8, 4, 1, 0)]) == [8, 4]


def test_largest_remainder_rounding():
    assert round_largest_remainder([1.75, 2.25], 4, [2, 2.5]) == [2, 2]
    assert round_largest_remainder([1 / 3] * 3, 1, [1, 1, 1]) == [1, 0, 0]
    assert sum(round_largest_remainder([2.4, 3.3, 4.3], 10, [9, 9, 9])) == 10


def test_limit_caps_demand():
    out = shares([10], [{"name": "a", "deserved": 1, "limit": 3}, {"name": "b", "deserved": 1}],
                 [("a", 8), ("b", 8)])
    assert out == {"a": 3, "b": 7}


def test_departments_divide_first():
    out = shares([16], [
        {"name": "d1", "deserved": 4}, {"name": "d2", "deserved": 4},
        {"name": "t1", "parent": "d1", "deserved": 4}, {"name": "t2", "parent": "d1"},
        {"name": "t3", "parent": "d2"},
    ], [("t1", 2), ("t2", 10), ("t3", 10)])
    assert out["d1"] == out["d2"] == 8
    assert out["t1"] == 2 and out["t2"] == 6 and out["t3"] == 8


def test_shares_never_exceed_capacity_when_not_overcommitted():
    out = shares([7], [{"name": n, "deserved": 1} for n in "abc"], [(n, 5) for n in "abc"])
    assert sum(out.values()) == 7 and max(out.values()) - min(out.values()) <= 1


def test_a_job_its_queue_does_not_admit_earns_it_no_share():
    """b's waiting job is of a namespace b does not admit: it could never start there, so b's
    demand is 0 and a, the only queue with demand, gets the whole cluster."""
    s = parse_scenario({
        "nodes": [{"name": "n0", "gpus": 8}],
        "queues": [{"name": "a", "deserved": 4}, {"name": "b", "deserved": 4, "namespaces": ["team-b"]}],
        "jobs": [{"name": "team-a/big", "queue": "a", "gpus": 8},
                 {"name": "team-a/sneak", "queue": "b", "gpus": 4}],
    })
    assert fair_shares(s) == {"a": 8, "b": 0}
