"""When the controller releases: what arrived while it planned is planned at once after the
round (no debounce on top), and a gang whose release stops part way (a patch refused, the API
server gone) keeps its released pods where they are, the rest placed by its reservation and
released by the next round, in every snapshot, by any replica; each round has its own request
budget; and while it runs, the cyclic garbage collector runs less often."""

import gc
import time

import pytest

from gpu_policy.controller import Controller, ControllerSettings
from gpu_policy.planner.gc_tuning import THRESHOLDS
from gpu_policy.kubernetes.names import RESERVATIONS_CONFIGMAP
from tests.kubernetes.controller_harness import (DEADLINE_S, cluster_of, gated_pod, json_patches, new_controller,
                                                 released, settle)


def test_what_arrives_while_a_round_plans_is_planned_right_after_it(api, cluster, fake_time):
    cluster_of(api)
    api.put(gated_pod("first", "a"))
    c = new_controller(cluster, debounce_s=0.2)
    try:
        settle(c, fake_time, lambda: "first" in released(api))
        plans, round_ = c.plans, c.round

        def a_long_round():  # one second of planning, and a pod arrives meanwhile
            plan = round_()
            fake_time.now += 1.0
            api.put(gated_pod("meanwhile", "b"))
            sees_queued(c, "meanwhile")
            return plan

        c.round = a_long_round
        fake_time.now += 61  # a resync is due
        assert c.step() and c.plans == plans + 1
        c.round = round_
        # no fake time passes: the pod has waited the whole round, longer than the debounce
        assert c.step() and c.plans == plans + 2
        assert "meanwhile" in released(api)
    finally:
        c.stop.set()


def test_every_round_has_its_own_request_budget(api, cluster, fake_time):
    """`max_requests_per_round` bounds one round (a look, its plan and the acting on it), not the
    controller's life: many rounds together send far more than one round may."""
    cluster_of(api)
    k8s = cluster(lease_duration_s=15.0, max_requests_per_round=30)
    c = Controller(k8s, ControllerSettings(debounce_s=0.2, watch_timeout_s=2.0))
    c.start()
    try:
        for batch in range(6):  # a release patch and an Event per pod: 20 requests a batch, 120 in all
            names = [f"p{batch}-{i}" for i in range(10)]
            for name in names:
                api.put(gated_pod(name, "ab"[batch % 2]))
            settle(c, fake_time, lambda: set(names) <= set(released(api)))
            fake_time.now += 300  # the pods end, as jobs do
            for name in names:
                api.delete("pods", name, "jobs")
        assert k8s.client.stats.calls > 3 * 30 and c.last_error is None
    finally:
        c.stop.set()


def test_the_running_controller_collects_garbage_less_often(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster)
    seen = []
    c.step = lambda: (seen.append(gc.get_threshold()), c.stop.set())
    c.run()
    assert seen == [THRESHOLDS]


def sees_queued(c: Controller, name: str) -> None:
    """Wait until the watch has queued the pod's arrival (not yet taken into the cache)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with c.changes.mutex:
            queued = [ch.obj for ch in c.changes.queue if ch.obj is not None]
        if any((obj.get("metadata") or {}).get("name") == name for obj in queued):
            return
        assert time.monotonic() < deadline, "the watch did not deliver within the deadline"
        time.sleep(0.01)


def gang_controller(cluster, fake_time) -> Controller:
    k8s = cluster(lease_duration_s=60.0, deadline_s=5.0)  # retries give up well within the lease
    c = Controller(k8s, ControllerSettings(debounce_s=0.2, watch_timeout_s=2.0))
    c.start()
    return c


@pytest.mark.parametrize("fault", ["refused", "unreachable"])
def test_a_gang_released_part_way_holds_its_nodes_and_the_rest_is_released_next(api, cluster, fake_time, fault):
    cluster_of(api)  # 4 nodes x 8 GPUs
    for i in range(4):
        api.put(gated_pod(f"g-{i}", "a", gpus=8, job="g", replicas=4))
    if fault == "refused":  # the pod changed under the patch: 422 once, the other pods go on
        api.inject(422, method="PATCH", path=r".*/pods/g-2")
    else:  # the API server answers nothing for g-2 until it is back: the round ends once the others,
        api.inject(503, method="PATCH", path=r".*/pods/g-2", times=None)  # sent beside it, are answered
    c = gang_controller(cluster, fake_time)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        first = released(api)
        assert sorted(first) == ["g-0", "g-1", "g-3"]
        # the reservation written before the first release holds the gang's four nodes
        assert "jobs.g" in api.get("configmaps", RESERVATIONS_CONFIGMAP, "gpu-policy")["data"]
        # every snapshot (a one-shot command's, another replica's) holds all four nodes' GPUs for the
        # gang and says it is released part way; nothing is broken, nothing evicted
        observed = cluster(deadline_s=5.0).observe()
        (gang,) = [j for j in observed.scenario.jobs if j.name == "jobs/g"]
        assert (gang.replicas, sorted(gang.running)) == (4, ["n1", "n2", "n3", "n4"])
        assert any(w.startswith("job jobs/g: released part way") for w in observed.warnings), observed.warnings
        assert not any("broken" in w for w in observed.warnings)

        api.faults.clear()  # the API server is back
        settle(c, fake_time, lambda: len(released(api)) == 4)
        final = released(api)
        assert {n: final[n] for n in first} == first  # the released pods stay where they were
        assert sorted(final.values()) == ["n1", "n2", "n3", "n4"]  # the rest onto the gang's other nodes
        assert api.evictions == []
        assert all(json_patches(api, f"g-{i}") >= 1 for i in range(4))
        assert json_patches(api, "g-0") == json_patches(api, "g-1") == 1  # never released twice
    finally:
        c.stop.set()
