"""Admission under a loaded control plane (issue 42): the Lease held through a round of
thousands of releases against an API server that answers slowly, with a standby that never
takes over; releases side by side, a bounded number at once; a burst larger than a round's
request budget carried over to the next round, with no failure, no warning and nothing lost."""

import logging
import threading

from gpu_policy.kubernetes import names
from tests.kubernetes.controller_harness import (DEADLINE_S, cluster_of, gated_pod, json_patches, new_controller,
                                                 released, sees, settle)


def writes(controller) -> int:
    """Write requests the replica sent (its own counters), the Lease's aside."""
    return sum(s.value for m in controller.metrics.api_requests.collect() for s in m.samples
               if s.name.endswith("_total") and s.labels["verb"] in ("patch", "create", "update")
               and s.labels["resource"] != "leases")


def lease_spec(api) -> dict:
    return api.get("leases", names.LEASE_NAME, names.DEFAULT_NAMESPACE, group="coordination.k8s.io")["spec"]


def test_a_round_of_thousands_of_slow_releases_keeps_the_lease_and_the_standby_waits(api, cluster, fake_time,
                                                                                   caplog):
    pods = 2000
    cluster_of(api, nodes=pods // 8)

    def slow(method, url, query, code):  # every answer comes 50 ms after its request, on the leader's clock
        fake_time.sleep(0.05)

    leader = new_controller(cluster, slow, kube={"max_requests_per_round": 3 * pods})
    standby = new_controller(cluster)
    done = threading.Event()

    def standby_turns():  # the standby turns on its own, looking at the Lease every third of it
        while not done.wait(0.02):
            standby.take_changes()
            standby.step()

    turning = threading.Thread(target=standby_turns, daemon=True)
    try:
        settle(leader, fake_time, lambda: leader.leading and leader.plans >= 1)
        turning.start()
        transitions = lease_spec(api)["leaseTransitions"]
        for i in range(pods):
            api.put(gated_pod(f"p-{i}", "ab"[i % 2]))
        sees(leader, lambda: len(leader.cache.views["pods"]) == pods)
        began, renewals = fake_time.now, api.calls(f"/apis/coordination.k8s.io/v1/namespaces/gpu-policy/leases/"
                                                   f"{names.LEASE_NAME}", "PUT")
        with caplog.at_level(logging.WARNING):
            leader.round()  # a patch and an Admitted Event per pod: 4,000 answers, 200 s of the leader's time
        took = fake_time.now - began
        assert took >= 2 * pods * 0.05 > 10 * leader.lease.settings.lease_duration_s  # many leases long
        assert len(released(api)) == pods and all(json_patches(api, f"p-{i}") == 1 for i in range(pods))
        assert leader.leading and "stopped acting" not in caplog.text and "lost" not in caplog.text
        spec = lease_spec(api)
        assert spec["holderIdentity"] == leader.lease.identity and spec["leaseTransitions"] == transitions
        assert api.calls(f"/apis/coordination.k8s.io/v1/namespaces/gpu-policy/leases/{names.LEASE_NAME}",
                         "PUT") - renewals >= took / 6  # renewed every third of the 15 s lease throughout
        done.set()
        turning.join(DEADLINE_S)
        assert not standby.leading and writes(standby) == 0
        assert standby.metrics.registry.get_sample_value("gpu_policy_is_leader") == 0
    finally:
        done.set()
        leader.stop.set()
        standby.stop.set()


def test_releases_go_out_side_by_side_at_most_max_requests_in_flight(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster, kube={"max_requests_in_flight": 4})
    try:
        settle(c, fake_time, lambda: c.leading and c.plans >= 1)
        for i in range(12):
            api.put(gated_pod(f"p-{i}", "ab"[i % 2]))
        sees(c, lambda: len(c.cache.views["pods"]) == 12)
        api.latency_s, api.peak_in_flight = 0.2, 0  # each answer 0.2 s late: those sent together overlap
        c.round()
        assert len(released(api)) == 12
        assert 1 < api.peak_in_flight <= 4
    finally:
        c.stop.set()


def test_a_burst_beyond_the_round_budget_is_carried_over_without_a_failure(api, cluster, fake_time, caplog):
    cluster_of(api)  # 32 GPUs: room for all
    c = new_controller(cluster, kube={"max_requests_per_round": 21})  # a patch and an Event each: 10 pods a round
    try:
        settle(c, fake_time, lambda: c.leading and c.plans >= 1)
        plans = c.plans
        for i in range(30):
            api.put(gated_pod(f"p-{i}", "ab"[i % 2]))
        sees(c, lambda: len(c.cache.views["pods"]) == 30)
        with caplog.at_level(logging.INFO):
            settle(c, fake_time, lambda: len(released(api)) == 30)
        assert c.plans - plans == 3  # 10 pods a round, each next round at once
        assert all(json_patches(api, f"p-{i}") == 1 for i in range(30))  # nothing released twice, nothing lost
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text  # no failed round
        admitted = [e for e in api.objects("events", "jobs", group="events.k8s.io")]
        assert sorted(e["regarding"]["name"] for e in admitted) == sorted(f"p-{i}" for i in range(30))
        assert {e["reason"] for e in admitted} == {"GpuPolicyAdmitted"}  # no pod was told it waits
    finally:
        c.stop.set()
