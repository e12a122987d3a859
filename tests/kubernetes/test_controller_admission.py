"""The controller admits gated pods: one plan releases them with their node, fair share and
limits hold at admission, gangs go together, other controllers' gates stay."""

from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.reservations import Reservation
from tests.kubernetes.controller_harness import (bind_released, cluster_of, gated_pod, json_patches, new_controller,
                                                 released, sees, settle)


def test_a_greedy_team_gets_its_share_and_the_other_team_is_admitted_at_once(api, cluster, fake_time):
    cluster_of(api)  # 4 nodes x 8 GPUs; a and b deserve 16 each
    for i in range(64):
        api.put(gated_pod(f"a-{i}", "a"))
    for i in range(16):
        api.put(gated_pod(f"b-{i}", "b"))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        first = released(api)
        assert sum(1 for n in first if n.startswith("b-")) == 16  # all of b's, in the first plan
        assert sum(1 for n in first if n.startswith("a-")) == 16
        assert bind_released(api) == 32
        # b's job ends and its replacement comes (as a Job controller's would): admitted in the next plan
        api.delete("pods", "b-0", "jobs")
        api.put(gated_pod("b-new", "b"))
        sees(c, lambda: c.cache.pod("jobs", "b-new") is not None and c.cache.pod("jobs", "b-0") is None)
        plans = c.plans
        settle(c, fake_time, lambda: "b-new" in released(api))
        assert c.plans == plans + 1
        bind_released(api)
        fake_time.now += 120  # resyncs plan the cached cluster again: nothing more to do
        settle(c, fake_time, turns=4)
        assert api.evictions == []  # no pod bound, then evicted
        assert sum(1 for n in released(api) if n.startswith("a-")) == 16
        assert all(json_patches(api, n) == 1 for n in released(api))
    finally:
        c.stop.set()


def test_a_queue_limit_holds_at_admission(api, cluster, fake_time):
    cluster_of(api, queues=[{"name": "a", "deserved": 8, "limit": 16}, {"name": "b", "deserved": 8}])
    for i in range(24):
        api.put(gated_pod(f"a-{i}", "a"))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        for _ in range(3):
            bind_released(api)
            fake_time.now += 61
            settle(c, fake_time)
            assert len(released(api)) == 16
        waiting = [ln for ln in c.metrics.text().decode().splitlines() if ln.startswith("gpu_policy_pending_pods{")]
        assert waiting == ['gpu_policy_pending_pods{queue="a",reason="QueueAboveLimit"} 8.0']
        events = api.objects("events", "jobs", group="events.k8s.io")
        said = [e for e in events if e["reason"] == "GpuPolicyWaiting"]
        assert len(said) == 8  # once per pod: the resyncs repeated the reason and grew each Event's series
        # what `kubectl describe pod` shows: the code, and the sentence with the numbers
        assert all(e["note"] == "QueueAboveLimit: a is at its limit: holds 16 of 16 GPUs" and e["series"]["count"] >= 2
                   for e in said), [e["note"] for e in said]
        assert all(e["reportingController"] == "gpu-policy.io/controller" for e in events)
        assert sum(1 for e in events if e["reason"] == "GpuPolicyAdmitted") == 16
    finally:
        c.stop.set()


def test_a_gang_is_released_whole_once_all_its_pods_exist(api, cluster, fake_time):
    cluster_of(api)
    for i in range(3):
        api.put(gated_pod(f"g-{i}", "a", gpus=8, job="g", replicas=4))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        assert released(api) == {}
        api.put(gated_pod("g-3", "a", gpus=8, job="g", replicas=4))
        settle(c, fake_time, lambda: len(released(api)) == 4)
        assert sorted(released(api).values()) == ["n1", "n2", "n3", "n4"]
    finally:
        c.stop.set()


def test_a_broken_gang_is_evicted_whole_and_the_controller_goes_on(api, cluster, fake_time):
    cluster_of(api)
    for i in range(4):  # a gang of 4: two run, two replacements wait gated (the others were evicted)
        pod = gated_pod(f"g-{i}", "a", gpus=8, job="g", replicas=4, **({"nodeName": f"n{i + 1}"} if i < 2 else {}))
        if i < 2:
            pod["spec"]["schedulingGates"], pod["status"] = [], {"phase": "Running"}
        api.put(pod)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(api.evictions) == 2)  # no job of the plan: evicted, and the loop goes on
        assert sorted(name for _, name in api.evictions) == ["g-0", "g-1"]
    finally:
        c.stop.set()


def test_a_gang_that_does_not_fit_whole_stays_gated_whole(api, cluster, fake_time):
    cluster_of(api, nodes=3)
    for i in range(4):
        api.put(gated_pod(f"g-{i}", "a", gpus=8, job="g", replicas=4))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        assert released(api) == {}
        assert not any(r.method == "PATCH" for r in api.requests)
    finally:
        c.stop.set()


def test_another_controllers_gate_stays(api, cluster, fake_time):
    cluster_of(api, labels={"n3": {"team": "x"}})
    api.put(gated_pod("p", "a", gates=("kueue.x-k8s.io/admission", names.ADMISSION_GATE),
                      nodeSelector={"team": "x"}))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        pod = api.get("pods", "p", "jobs")
        assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
        assert pod["spec"]["nodeSelector"] == {"team": "x", names.HOSTNAME_LABEL: "n3"}
        fake_time.now += 61
        settle(c, fake_time)  # still gated by kueue, yet it holds its GPUs: not released twice
        assert json_patches(api, "p") == 1
    finally:
        c.stop.set()


def test_a_pinned_pod_is_released_onto_its_node(api, cluster, fake_time):
    cluster_of(api, nodes=2)
    api.put(gated_pod("pinned", "a", gpus=8, nodeSelector={names.HOSTNAME_LABEL: "n2"}))
    api.put(gated_pod("free", "a", gpus=8))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(released(api)) == 2)
        assert released(api) == {"pinned": "n2", "free": "n1"}
        assert api.get("pods", "pinned", "jobs")["spec"]["nodeSelector"] == {names.HOSTNAME_LABEL: "n2"}
    finally:
        c.stop.set()


def test_a_moved_jobs_replacement_pods_are_released_where_the_plan_reserved(api, cluster, fake_time):
    cluster_of(api, nodes=2)
    moved = Reservation("jobs", "moved", "a", 4, 2, ["n2", "n2"], [[0, 1, 2, 3], [4, 5, 6, 7]],
                        fake_time.time() + 600)
    api.put({"kind": "ConfigMap", "metadata": {"name": names.RESERVATIONS_CONFIGMAP, "namespace": "gpu-policy"},
             "data": {moved.key: moved.value()}})
    api.put(gated_pod("other", "b", gpus=8))  # n2 is promised: it goes to n1
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: "other" in released(api))
        for i in range(2):
            api.put(gated_pod(f"moved-{i}", "a", gpus=4, job="moved"))
        settle(c, fake_time, lambda: len(released(api)) == 3)
        assert released(api) == {"other": "n1", "moved-0": "n2", "moved-1": "n2"}
    finally:
        c.stop.set()


def test_a_released_pod_not_bound_in_time_is_reported_and_keeps_its_gpus(api, cluster, fake_time):
    cluster_of(api, nodes=1)
    api.put(gated_pod("slow", "a", gpus=8))
    api.put(gated_pod("next", "b", gpus=8))
    c = new_controller(cluster, bind_timeout_s=120.0)
    try:
        settle(c, fake_time, lambda: "slow" in released(api) or "next" in released(api))
        first = next(iter(released(api)))
        fake_time.now += 121
        settle(c, fake_time, lambda: "gpu_policy_bind_timeouts_total 1.0" in c.metrics.text().decode())
        events = api.objects("events", "jobs", group="events.k8s.io")
        late = [e for e in events if e["reason"] == "GpuPolicyBindTimeout"]
        assert [(e["regarding"]["name"], e["type"]) for e in late] == [(first, "Warning")]
        assert list(released(api)) == [first] and api.get("pods", first, "jobs") is not None  # held, never deleted
    finally:
        c.stop.set()
