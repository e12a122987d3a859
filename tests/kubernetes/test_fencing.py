"""Fencing: no write after the last renewal is as old as the lease; a Lease another holder
wrote is read as untrusted (issue 29)."""

import logging

import pytest

from gpu_policy.errors import ClusterBusy, ClusterObjectError
from gpu_policy.kubernetes.clocks import stamp
from gpu_policy.kubernetes.names import LEASE_NAME


def foreign_lease(api, fake_time, **spec) -> None:
    api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": LEASE_NAME, "namespace": "gpu-policy"},
             "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 30,
                      "renewTime": stamp(fake_time.time()), **spec}})


def test_no_write_once_the_last_renewal_is_as_old_as_the_lease(api, cluster, fake_time):
    c = cluster(lease_duration_s=30)
    c.lease.acquire()
    fake_time.sleep(29)
    c.lease.check()  # 29 s after the renewal was sent: still ours
    fake_time.sleep(1)
    with pytest.raises(ClusterBusy, match=r"lost the planning lease \(its last renewal was sent 30 s ago and the "
                                          r"lease lasts 30 s\); nothing more was done$"):
        c.lease.check()


def test_a_renewal_counts_from_when_it_was_sent(api, cluster, fake_time):
    c = cluster(lease_duration_s=30)
    c.lease.acquire()
    fake_time.sleep(20)
    slow = c.lease.client._request

    def answered_late(*args, **kwargs):  # the renewal is answered 15 s after it was sent
        answer = slow(*args, **kwargs)
        fake_time.sleep(15)
        return answer

    c.lease.client._request = answered_late
    c.lease.renew()
    fake_time.sleep(15)  # 30 s after the renewal was sent, 15 s after it was answered
    with pytest.raises(ClusterBusy, match="its last renewal was sent 30 s ago"):
        c.lease.check()


@pytest.mark.parametrize("spec,told", [
    ({"renewTime": "2999-01-01T00:00:00.000000Z"}, "a renewTime in the future, but has not changed for 121 s"),
    ({"leaseDurationSeconds": 10 ** 12}, "leaseDurationSeconds 1000000000000; at most 120 s is honoured"),
])
def test_a_lease_that_claims_too_much_is_expired_after_a_bounded_time(api, cluster, fake_time, caplog, spec, told):
    foreign_lease(api, fake_time, **spec)
    c = cluster(lease_poll_s=1, lease_wait_s=600, max_foreign_lease_s=120)
    began = fake_time.now
    with caplog.at_level(logging.WARNING):
        c.lease.acquire()
    assert 120 < fake_time.now - began <= 122
    assert f"took over Lease gpu-policy/{LEASE_NAME} from someone-else, whose lease had expired (it says {told})" \
        in caplog.text


@pytest.mark.parametrize("spec", [
    {"holderIdentity": 7}, {"leaseDurationSeconds": "30", "renewTime": 12}, {"holderIdentity": None, "leaseTransitions": "many"},
])
def test_lease_fields_of_the_wrong_type_count_as_absent(api, cluster, fake_time, spec):
    foreign_lease(api, fake_time, **spec)
    c = cluster()
    c.lease.acquire()  # at once: no holder, or a renewal that cannot be read, is no claim
    assert fake_time.sleeps == []
    assert api.get("leases", LEASE_NAME, "gpu-policy", group="coordination.k8s.io")["spec"]["holderIdentity"] == \
        c.lease.identity


def test_a_lease_answer_without_a_resource_version_is_one_line(cluster, fake_time):
    c = cluster()
    c.lease.client.read_lease = lambda name: {"metadata": {}, "spec": {}}
    with pytest.raises(ClusterObjectError, match=rf"^Lease gpu-policy/{LEASE_NAME}: metadata.resourceVersion: must be "):
        c.lease.acquire()


@pytest.mark.parametrize("refusal", ["budget", "503"])
def test_a_write_is_not_sent_again_once_the_lease_is_lost(api, cluster, fake_time, refusal):
    """An eviction a PodDisruptionBudget refuses (429), or one the API server fails (503), is
    retried for up to a minute; another planner takes the Lease over after the first attempt, and
    no attempt goes out once this one knows it lost the Lease: each retry passes the fence."""
    from gpu_policy.actions.cycle import apply_plan_once
    from tests.kubernetes.test_checkpoint_first import reclaim_cluster

    reclaim_cluster(api)
    if refusal == "budget":
        api.block_eviction("a", "borrow-0")  # 429 without Retry-After, every time
    else:
        api.inject(503, method="POST", path="/api/v1/namespaces/a/pods/borrow-0/eviction", times=None)
    c = cluster(lease_duration_s=15)
    sent = []  # for each eviction attempt: why the Lease was lost when it went out (None: held)
    attempt = c.client._attempt

    def each_attempt(what, *args):
        if what.startswith("evict pod"):
            sent.append(c.lease.lost)
            if len(sent) == 1:
                foreign_lease(api, fake_time, leaseDurationSeconds=15)
        return attempt(what, *args)

    c.client._attempt = each_attempt
    with pytest.raises(ClusterBusy, match="lost the planning lease"):
        apply_plan_once(c, execute=True)
    assert len(sent) >= 2 and not any(sent)  # retried while it held the Lease, never after
    assert c.lease.lost


def test_a_lease_longer_than_another_planner_honours_is_refused(capsys):
    """Another replica honours a Lease at most `max_foreign_lease_s`: a longer one of ours would be
    taken over while we still act on it (two leaders), so it is refused, in the settings and on
    the command line (one line, exit 2)."""
    from gpu_policy.cli import main
    from gpu_policy.kubernetes import KubernetesSettings

    with pytest.raises(ValueError, match=r"lease_duration_s: must be at most max_foreign_lease_s \(120 s"):
        KubernetesSettings(lease_duration_s=600).validate()
    assert KubernetesSettings(lease_duration_s=120).validate().lease_duration_s == 120
    assert main(["controller", "--cluster", "k8s://", "--lease-duration", "600"]) == 2
    err = capsys.readouterr().err
    assert "--lease-duration: must be at most max_foreign_lease_s (120 s" in err and err.count("\n") == 1
