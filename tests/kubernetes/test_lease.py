"""One planner at a time: the Lease gpu-policy-planner on the fake API server."""

import threading
import time

import pytest

from gpu_policy.errors import ClusterBusy
from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings
from gpu_policy.kubernetes.names import LEASE_NAME

LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/gpu-policy/leases/{LEASE_NAME}"


def lease(api) -> dict:
    return api.get("leases", LEASE_NAME, "gpu-policy", group="coordination.k8s.io")


def test_planners_started_together_never_hold_it_at_once(api, kubeconfig):
    holding, overlaps, turns = [], [], []
    guard = threading.Lock()

    def planner(k: int) -> None:
        c = KubernetesCluster(kubeconfig=kubeconfig, settings=KubernetesSettings(lease_poll_s=0.01))
        for _ in range(5):
            with c.planning():
                with guard:
                    holding.append(k)
                    if len(holding) > 1:
                        overlaps.append(list(holding))
                    turns.append(lease(api)["spec"]["holderIdentity"])
                time.sleep(0.005)
                with guard:
                    holding.remove(k)

    threads = [threading.Thread(target=planner, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert overlaps == [] and len(turns) == 15 and len(set(turns)) == 3
    assert lease(api)["spec"].get("holderIdentity") is None  # released by an update
    assert api.calls(LEASE_PATH, "DELETE") == 0


def test_a_planner_that_died_is_replaced_once_its_lease_expires(api, cluster, fake_time):
    dead = cluster(lease_duration_s=30)
    dead.lease.acquire()  # and then it dies: no renewal, no release
    began = fake_time.now
    successor = cluster(lease_duration_s=30, lease_poll_s=1)
    with successor.planning():
        spec = lease(api)["spec"]
        assert spec["holderIdentity"] == successor.lease.identity and spec["leaseTransitions"] == 1
    assert 30 <= fake_time.now - began <= 32  # waited for the expiry, not for ever


def test_waiting_is_bounded(api, cluster):
    cluster().lease.acquire()
    with pytest.raises(ClusterBusy, match=r"^k8s://: Lease gpu-policy/gpu-policy-planner is held by .+, renewed 5 s ago; "
                                          r"gave up after waiting 5 s for it$"):
        cluster(lease_wait_s=5).lease.acquire()


def test_a_conflict_means_look_again(api, cluster):
    c = cluster()
    api.inject(409, method="POST", path=r".*/leases")  # someone created it first
    c.lease.acquire()
    c.lease.release()
    api.inject(409, method="PUT", path=LEASE_PATH)  # someone wrote it first
    c.lease.acquire()
    assert lease(api)["spec"]["holderIdentity"] == c.lease.identity
    assert [r.status for r in api.requests if r.path.endswith("leases") or r.path == LEASE_PATH][:3] == [404, 409, 404]


def test_a_planner_that_lost_the_lease_stops_acting(api, cluster, fake_time):
    slow = cluster(lease_duration_s=30)
    slow.lease.acquire()
    fake_time.sleep(31)  # it stalled past its lease
    cluster(lease_duration_s=30).lease.acquire()  # and was replaced
    slow.lease.renew()
    with pytest.raises(ClusterBusy, match="lost the planning lease \\(another planner wrote it\\); nothing more was done"):
        slow.lease.check()


def test_the_lease_is_renewed_while_the_planner_works(api, kubeconfig):
    c = KubernetesCluster(kubeconfig=kubeconfig, settings=KubernetesSettings(lease_duration_s=0.3))
    with c.planning():
        first = lease(api)["metadata"]["resourceVersion"]
        time.sleep(0.5)
        assert lease(api)["metadata"]["resourceVersion"] != first and not c.lease.lost


@pytest.mark.parametrize("written", [False, True], ids=["answered-409", "answered-late"])
def test_a_late_renewal_does_not_undo_the_lease_taken_again(api, cluster, written):
    """The loop stands by without waiting for a renewal in flight and may take the lease again at
    once; that renewal's answer, refused (the new write came first) or late (it came first), is
    no longer this holder's news."""
    c = cluster(lease_duration_s=30)
    c.lease.acquire()
    send = c.lease.client.replace_lease

    def meanwhile():
        c.lease.lose("fenced")
        assert c.lease.try_acquire()[0]

    def renewal(name, spec, version, deadline_s=None):
        c.lease.client.replace_lease = send
        if written:
            answer = send(name, spec, version, deadline_s=deadline_s)
            meanwhile()
            return answer
        meanwhile()
        return send(name, spec, version, deadline_s=deadline_s)

    c.lease.client.replace_lease = renewal
    c.lease.renew()
    c.lease.check()  # still ours
    c.lease.renew()
    c.lease.check()
    assert lease(api)["spec"]["holderIdentity"] == c.lease.identity
