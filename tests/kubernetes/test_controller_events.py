"""What `kubectl describe pod` shows of gpu-policy: the Events on the pod, read through the
fake API server. Why a pod waits (the code and the numbers), why one is preempted (before
it goes), and why one is never admitted (a Warning)."""

from tests.kubernetes.controller_harness import (cluster_of, described, gated_pod, new_controller, not_admitted_note,
                                                 released, settle)
from tests.kubernetes.test_act import eviction_cluster


def test_a_victim_is_told_why_before_it_is_evicted(api, cluster, fake_time):
    eviction_cluster(api, pods=2)  # team-a's gang borrows the 8 GPUs team-b deserves
    api.delete("pods", "owner", "b")
    api.put({"kind": "Namespace", "metadata": {"name": "b", "labels": {"gpu-policy.io/managed": "true"}}})
    api.put(gated_pod("owner", "team-b", gpus=8, namespace="b"))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(api.evictions) == 2)
        for r in range(2):
            (said,) = [e for e in described(api, "a", f"borrow-{r}") if e["reason"] == "GpuPolicyPreempted"]
            assert said["type"] == "Normal"
            assert said["note"].startswith("ReclaimedFairShare: reclaimed for team-b (fair share tier): team-b ends at 8")
        posts = [(i, q.path) for i, q in enumerate(api.requests) if q.method == "POST"]
        first_eviction = min(i for i, path in posts if path.endswith("/eviction"))
        told = [i for i, path in posts if path == "/apis/events.k8s.io/v1/namespaces/a/events"]
        assert len(told) == 2 and max(told) < first_eviction  # said before it goes
        # each victim pod costs its annotation and its eviction: the controller reads it from its cache
        for r in range(2):
            path = f"/api/v1/namespaces/a/pods/borrow-{r}"
            assert [q.method for q in api.requests if q.path in (path, path + "/eviction")] == ["PATCH", "POST"]
    finally:
        c.shut_down()


def test_a_pod_its_namespace_may_not_queue_with_gets_a_warning(api, cluster, fake_time):
    cluster_of(api, nodes=1, queues=[{"name": "a", "deserved": 8, "namespaces": ["ml"]}])
    api.put(gated_pod("sneak", "a"))  # in namespace jobs, which queue a does not list
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1 and described(api, "jobs", "sneak"))
        note = not_admitted_note(api, "jobs", "sneak")
        assert note == "NotAllowedInQueue: not admitted: namespace jobs may not use queue a"
    finally:
        c.shut_down()


def test_a_pod_gpu_policy_cannot_read_is_told_so_and_the_rest_is_planned(api, cluster, fake_time):
    """Issue 29: one odd pod never stops planning; the pod itself says what is wrong with it."""
    cluster_of(api, nodes=1)
    bad = gated_pod("bad", "a")
    bad["metadata"]["annotations"] = {"gpu-policy.io/gpu-index": "²"}
    api.put(bad)
    api.put(gated_pod("good", "a"))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1 and described(api, "jobs", "bad"))
        assert "good" in released(api) and "bad" not in released(api)
        note = not_admitted_note(api, "jobs", "bad")
        assert note.startswith("UnreadablePod: pod jobs/bad: metadata.annotations.gpu-policy.io/gpu-index: "), note
    finally:
        c.shut_down()


def test_an_admitted_pod_is_told_its_node_and_its_queues_gpus(api, cluster, fake_time):
    cluster_of(api, nodes=1, queues=[{"name": "a", "deserved": 8}])
    api.put(gated_pod("one", "a", gpus=2))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1 and described(api, "jobs", "one"))
        (said,) = described(api, "jobs", "one")
        assert (said["reason"], said["note"]) == ("GpuPolicyAdmitted",
                                                  "Admitted: onto n1; a 0 -> 2 GPUs (a replica of jobs/one)")
    finally:
        c.shut_down()


def test_a_pod_asking_more_than_any_node_holds_waits_with_an_event_naming_it(api, cluster, fake_time):
    """Issue 29: one user's typo (2,000 GPUs) never stops fair share for everyone else."""
    cluster_of(api, nodes=2)
    api.put(gated_pod("typo", "a", gpus=2000))
    api.put(gated_pod("fine", "b", gpus=4))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1 and described(api, "jobs", "typo"))
        assert "fine" in released(api) and "typo" not in released(api)
        note = not_admitted_note(api, "jobs", "typo")
        assert note.startswith("NoNodeFits: pod jobs/typo: spec.containers[*].resources.requests.nvidia.com/gpu: "
                               "no node could ever hold it"), note
    finally:
        c.shut_down()
