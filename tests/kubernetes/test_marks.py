"""The `gpu-policy.io/preempted` mark is removed when the plan that wrote it is not carried
out: a refused eviction, or a planner killed between the mark and the eviction (issue 29)."""

from gpu_policy.actions.cycle import apply_plan_once
from gpu_policy.kubernetes import names
from tests.kubernetes.test_act import eviction_cluster


def marks(api) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["annotations"][names.PREEMPTED_ANNOTATION]
            for p in api.objects("pods", "a") if names.PREEMPTED_ANNOTATION in (p["metadata"].get("annotations") or {})}


def test_a_refused_eviction_leaves_no_mark(api, cluster):
    eviction_cluster(api, pods=2)
    api.block_eviction("a", "borrow-1")
    _, (outcome,) = apply_plan_once(cluster(eviction_deadline_s=10), execute=True)
    assert outcome.result == "blocked"
    assert api.evictions == [("a", "borrow-0")] and "borrow-1" not in marks(api)


def test_a_mark_left_by_a_killed_planner_goes_when_a_later_plan_keeps_the_pod(api, cluster):
    eviction_cluster(api)
    api.delete("pods", "owner", "b")  # the owner gave up: the borrower is kept now
    pod = api.get("pods", "borrow-0", "a")
    pod["metadata"]["annotations"][names.PREEMPTED_ANNOTATION] = "reclaim for b/owner"  # marked, never evicted
    api.put(pod)
    c = cluster()
    plan, dry = apply_plan_once(c, execute=False)
    assert plan.job("a/borrow").action == "keep"
    assert [(o.action, o.job, o.result) for o in dry] == [("unmark", "a/borrow", "dry run")]
    assert marks(api) == {"borrow-0": "reclaim for b/owner"}
    _, done = apply_plan_once(c, execute=True)
    assert [(o.action, o.result, o.pods) for o in done] == [("unmark", "done", ["a/borrow-0"])]
    assert marks(api) == {} and api.evictions == []
    assert apply_plan_once(c, execute=True)[1] == []  # nothing left to do


def test_a_mark_on_a_victim_the_plan_still_evicts_stays(api, cluster):
    eviction_cluster(api)
    pod = api.get("pods", "borrow-0", "a")
    pod["metadata"]["annotations"][names.PREEMPTED_ANNOTATION] = "reclaim for b/owner"
    api.put(pod)
    _, outcomes = apply_plan_once(cluster(), execute=True)
    assert [(o.action, o.result) for o in outcomes] == [("preempt", "done")]
    assert api.evictions == [("a", "borrow-0")]
