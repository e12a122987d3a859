"""The policy's rules as functions (gpu_policy.planner.rules): what other policies import."""

from gpu_policy import parse_scenario
from gpu_policy.model import Job
from gpu_policy.planner.core.queues import GUARANTEE, QueueTree, Shares
from gpu_policy.planner.rules.claims import best_fill, relative_share, start_order
from gpu_policy.planner.rules.inside import may_preempt_inside, may_swap_back
from gpu_policy.planner.rules.limits import limit_blocker, nonpreemptible_blocker, nonpreemptible_bound
from gpu_policy.planner.rules.reclaim import keeps_floor, reclaim_tiers


def departments() -> QueueTree:
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 8}],
                        "queues": [{"name": "d1"}, {"name": "d2"}, {"name": "a", "parent": "d1"},
                                   {"name": "b", "parent": "d1"}, {"name": "c", "parent": "d2"}],
                        "jobs": []})
    return QueueTree.of(s)


def test_the_department_walk_stops_below_the_common_ancestor():
    tree = departments()
    assert tree.judged("a", "c") == (["a", "d1"], ["c", "d2"])   # judged between d1 and d2 (and below)
    assert tree.judged("a", "b") == (["a"], ["b"])               # siblings: between the queues
    assert tree.leaves_under("d1") == ["a", "b"] and tree.depth("a") == 1


def test_each_victim_must_be_needed_above_the_floor():
    # holds 3, floor 1: losing 2 one-GPU jobs leaves 2 before the last -> allowed; 3 -> not
    assert keeps_floor(held_before=3, lost=2, largest=1, floor_=1)
    assert not keeps_floor(held_before=3, lost=3, largest=1, floor_=1)
    # an indivisible job may take a queue below its floor when it is the only victim
    assert keeps_floor(held_before=8, lost=8, largest=8, floor_=4)


def test_tiers():
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 9}],
                        "queues": [{"name": "a", "deserved": 2}, {"name": "b", "deserved": 2}],
                        "jobs": [{"name": f"a{i}", "queue": "a", "gpus": 2} for i in range(5)]
                        + [{"name": "b1", "queue": "b", "gpus": 2}]})
    tree, shares = QueueTree.of(s), Shares.of(s)
    assert shares.fair == {"a": 7, "b": 2} and shares.guarantee == {"a": 2, "b": 2}
    # a holds 6: below its fair share (7), above its deserved (2): only the guarantee tier
    assert reclaim_tiers(tree, shares, {"a": 6, "b": 0}, "b", "a", 2) == [GUARANTEE]
    assert reclaim_tiers(tree, shares, {"a": 6, "b": 0}, "a", "a", 2) == []


def test_inside_a_queue_only_a_higher_priority_preempts_and_swaps_back():
    low = Job("low", "q", 2, priority=10, running=["n"])
    high = Job("high", "q", 2, priority=50)
    assert may_preempt_inside(low, high) and not may_preempt_inside(high, low)
    # after `high` is preempted, it could take the place of a lower-priority 2-GPU start...
    assert may_swap_back(Job("v", "q", 2, priority=50), Job("s", "q", 2, priority=10))
    # ...but not of a half-GPU one, nor of an equal priority
    assert not may_swap_back(Job("v", "q", 2, priority=50), Job("s", "q", 0.5, priority=10))
    assert not may_swap_back(Job("v", "q", 2, priority=50), Job("s", "q", 2, priority=50))
    # a fraction takes the place of a whole-GPU start (one of its GPUs holds it), or of smaller
    # fractions whose replicas could share one GPU
    half = Job("v", "q", 0.5, priority=50)
    assert may_swap_back(half, Job("s", "q", 4, priority=10))
    assert may_swap_back(half, Job("s", "q", 0.25, replicas=3, priority=10))
    assert not may_swap_back(half, Job("s", "q", 0.25, priority=10))
    assert not may_swap_back(Job("v", "q", 0.5, replicas=3, priority=50), Job("s", "q", 1, replicas=2, priority=10))


def test_limits_and_non_preemptible_work_name_the_entity_that_blocks():
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 8}],
                        "queues": [{"name": "d", "deserved": 2, "limit": 4}, {"name": "a", "parent": "d", "deserved": 4}],
                        "jobs": []})
    tree, shares = QueueTree.of(s), Shares.of(s)
    assert limit_blocker(tree, shares, {"a": 3, "d": 3}, "a", 2) == "d"
    assert limit_blocker(tree, shares, {"a": 1, "d": 1}, "a", 2) is None
    assert nonpreemptible_blocker(tree, shares, {"a": 0, "d": 0}, "a", 4) == "d"
    assert nonpreemptible_bound(shares, "d", 3) == 3   # never below what already runs


def test_start_order_is_by_relative_share_departments_first():
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 2}],
                        "queues": [{"name": "d1", "deserved": 2}, {"name": "d2", "deserved": 4},
                                   {"name": "q1", "parent": "d1", "deserved": 8},
                                   {"name": "q2", "parent": "d2", "deserved": 1}],
                        "jobs": [{"name": "q1-a", "queue": "q1", "gpus": 1, "submitted_at": 0},
                                 {"name": "q1-b", "queue": "q1", "gpus": 1, "submitted_at": 1},
                                 {"name": "q2-a", "queue": "q2", "gpus": 1, "submitted_at": 2}]})
    tree, shares = QueueTree.of(s), Shares.of(s)
    held = {q: 0.0 for q in tree.parent}
    order = [j.name for j in start_order(tree, shares, held, s.jobs)]
    assert order == ["q2-a", "q1-a", "q1-b"]
    assert relative_share(1, 1, deserved=4, fair=2) == 0.5


def test_best_fill_counts_whole_jobs_only():
    assert best_fill([3, 0.5], 3) == 3
    assert best_fill([2, 2, 0.5], 3) == 2.5
    assert best_fill([4], 2) == 0


def test_a_reclaim_reason_says_when_the_receiver_also_borrows():
    """a's 8-GPU claim needs b's node; a's two 1-GPU jobs then borrow the two GPUs left free.
    a ends above its fair share, and the victim's reason says which part is the claim."""
    from gpu_policy import plan

    s = parse_scenario({
        "nodes": [{"name": "n1", "gpus": 8}, {"name": "n2", "gpus": 4}],
        "queues": [{"name": "a", "deserved": 8}, {"name": "b", "deserved": 4}],
        "jobs": [{"name": "b-big", "queue": "b", "gpus": 8, "running": ["n1"]},
                 {"name": "b-small", "queue": "b", "gpus": 2, "running": ["n2"]},
                 {"name": "a-big", "queue": "a", "gpus": 8, "submitted_at": 10},
                 {"name": "a-1", "queue": "a", "gpus": 1, "submitted_at": 11},
                 {"name": "a-2", "queue": "a", "gpus": 1, "submitted_at": 12}]})
    result = plan(s)
    assert [j.name for j in result.jobs if j.action == "start"] == ["a-big", "a-1", "a-2"]
    assert result.job("b-big").reason.startswith(
        "reclaimed for a (fair share tier): a ends at 10: its claims within its fair share of 8, "
        "the rest borrowed on GPUs no claim could use; b held 10 GPUs")
