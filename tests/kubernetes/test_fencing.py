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
