"""Admission under a loaded control plane (issue 42): the Lease held through a round of
thousands of releases against an API server that answers slowly, with a standby that never
takes over."""

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
