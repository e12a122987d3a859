"""The informer: LIST once per kind, then WATCH; a dropped watch resumes where it was, a 410
relists that kind only, and steady state costs no LIST."""

from tests.kubernetes.controller_harness import cluster_of, gated_pod, new_controller, released, settle


def lists(api, plural: str) -> int:
    return sum(1 for r in api.requests if r.verb == "list" and r.resource == f"/{plural}")


def test_dropped_watches_resume_and_a_410_relists_that_kind_only(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        api.drop_watches(abrupt=True)
        api.put(gated_pod("after-drop", "a"))
        settle(c, fake_time, lambda: "after-drop" in released(api))
        api.expire_history("pods")
        api.put(gated_pod("after-410", "a"))
        settle(c, fake_time, lambda: "after-410" in released(api))
        assert c.informer.lists["pods"] == 2 and c.informer.lists["nodes"] == 1
        assert lists(api, "pods") == 2 and lists(api, "nodes") == 1
        text = c.metrics.text().decode()
        assert 'gpu_policy_watch_restarts_total{resource="pods"}' in text
    finally:
        c.stop.set()


def test_steady_state_costs_no_list(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        listed = sum(1 for r in api.requests if r.verb == "list")
        for i in range(5):
            api.put(gated_pod(f"p-{i}", "b"))
            fake_time.now += 61  # a resync each time, from the cache
            settle(c, fake_time, lambda: f"p-{i}" in released(api))
        assert sum(1 for r in api.requests if r.verb == "list") == listed
        assert c.plans >= 6
    finally:
        c.stop.set()
