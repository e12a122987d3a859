"""Reservations: keys that fit any legal names, values checked before writing and read back
as untrusted (issue 29)."""

import json
import re

import pytest

from gpu_policy import Job
from gpu_policy.actions.cycle import apply_plan_once, wait_for_step
from gpu_policy.errors import ClusterObjectError, UsageError
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.reservations import MAX_KEY, Reservation, key_of, read_reservations
from tests.kubernetes.test_act import reservations, steps_cluster

LONG_NAMESPACE = "n" * 63
POD_NAMED_JOB = "trainer-" + "x" * 245  # a pod name may have 253 characters


def config_map(data: dict) -> dict:
    return {"metadata": {"namespace": "gpu-policy", "name": names.RESERVATIONS_CONFIGMAP}, "data": data}


def reservation(job: str = POD_NAMED_JOB, **change) -> Reservation:
    return Reservation(**{"namespace": LONG_NAMESPACE, "job": job, "queue": "team-a", "gpus": 8, "replicas": 1,
                          "nodes": ["n1"], "gpu_indices": None, "expires_at": 1.8e9, **change})


def test_a_long_key_is_hashed_and_read_back_through_its_value():
    r = reservation()
    assert len(r.key) == MAX_KEY and r.key.startswith(f"{LONG_NAMESPACE}.trainer-xxx")
    assert key_of(f"{LONG_NAMESPACE}/{POD_NAMED_JOB}y") != r.key  # another job, another key
    r.check()
    (back,), bad = read_reservations(config_map({r.key: r.value()}))
    assert bad == {} and back.job_name == r.job_name and back.key == r.key
    assert key_of("ml/train") == "ml.train"  # short keys stay readable


@pytest.mark.parametrize("change,field,problem", [
    ({"priority": 10 ** 31}, "priority", "must be a whole number within int64, got a number of 32 digits"),
    ({"gpus": 1e308}, "gpus", "must be at most 1,024, got 1e+308"),
    ({"gpus": 5e-324}, "gpus", "a fraction of a GPU must be at least 0.001"),
    ({"expires_at": float("nan")}, "expires_at", "must be a time before the year 5000, got nan"),
    ({"expires_at": 1e308}, "expires_at", "must be a time before the year 5000"),
])
def test_what_would_not_read_back_is_refused_before_writing(change, field, problem):
    line = rf"^reservation for ml/train: (data\.ml\.train\.)?{field}: {re.escape(problem)}"
    with pytest.raises(ClusterObjectError, match=line):
        reservation(**{"namespace": "ml", "job": "train", **change}).check()


def test_a_bad_reservation_on_the_cluster_is_a_warning_and_dropped(api, cluster):
    steps_cluster(api)
    api.put({"kind": "ConfigMap", **config_map({
        "steps.huge": json.dumps({"queue": "team-a", "gpus": 1e308, "replicas": 1, "nodes": ["n1"],
                                  "expires_at": "2030-01-01T00:00:00Z"}),
        "steps.loud": json.dumps({"queue": "team-a", "gpus": 8, "replicas": 1, "nodes": ["n1"], "priority": 10 ** 31,
                                  "expires_at": "2030-01-01T00:00:00Z"})})})
    c = cluster()
    observation = c.observe()
    assert [w for w in observation.warnings if "reservations" in w] == [
        "ConfigMap gpu-policy/gpu-policy-reservations: data.steps.huge.gpus: must be at most 1,024, got 1e+308: "
        "ignored, and dropped at the next write",
        "ConfigMap gpu-policy/gpu-policy-reservations: data.steps.loud.priority: must be a whole number within int64, "
        "got a number of 32 digits: ignored, and dropped at the next write"]
    first = wait_for_step(c, Job("steps/first", "team-a", 8), execute=True)
    assert first.can_start and sorted(reservations(api)) == ["steps.first"]  # the bad ones went with that write
    plan, _ = apply_plan_once(cluster(), execute=True)
    assert plan.job("steps/first").action == "keep"


def test_a_step_whose_reservation_would_not_read_back_writes_nothing(api, cluster):
    steps_cluster(api)
    with pytest.raises(ClusterObjectError, match=r"^reservation for steps/first: data\.steps\.first\.priority: "):
        wait_for_step(cluster(), Job("steps/first", "team-a", 8, priority=2 ** 63), execute=True)
    assert api.get("configmaps", names.RESERVATIONS_CONFIGMAP, "gpu-policy") is None
    assert api.evictions == []


@pytest.mark.parametrize("option,value", [("max_wait_s", float("nan")), ("max_wait_s", float("inf")),
                                          ("max_wait_s", 1e308), ("poll_interval_s", 0), ("max_wait_s", -1)])
def test_a_wait_that_would_never_end_is_refused(api, cluster, option, value):
    steps_cluster(api)
    with pytest.raises(UsageError, match=rf"^{option}: must be a number of seconds from [\d.]+ to 2,592,000, got "):
        wait_for_step(cluster(), Job("steps/first", "team-a", 8), execute=True, **{option: value})
    assert api.requests == []  # refused before looking


def test_a_reservation_the_plan_gives_away_releases_nothing_and_is_said_on_the_pod(api, cluster, fake_time):
    """A step's reservation (queue b, borrowing all 8 GPUs of n1) whose pod has appeared, gated,
    while a's own job asks for its deserved 8: the plan preempts the reservation, so its pod stays
    gated and is told why (an Event), the reservation goes, and only a's pod is released."""
    from tests.kubernetes.controller_harness import cluster_of, described, gated_pod, new_controller, released, settle

    cluster_of(api, nodes=1, gpus=8, queues=[{"name": "a", "deserved": 8}, {"name": "b", "deserved": 0}])
    r = Reservation("jobs", "r", "b", 8, 1, ["n1"], [list(range(8))], fake_time.time() + 600)
    api.put({"kind": "ConfigMap", "data": {r.key: r.value()},
             "metadata": {"name": names.RESERVATIONS_CONFIGMAP, "namespace": names.DEFAULT_NAMESPACE}})
    api.put(gated_pod("r-0", "b", gpus=8, job="r"))
    api.put(gated_pod("a-0", "a", gpus=8))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        settle(c, fake_time, turns=3)
        assert released(api) == {"a-0": "n1"}  # 8 GPUs promised once
        notes = [e["note"] for e in described(api, "jobs", "r-0")]
        assert any("its reservation is given back: reclaimed for a" in note for note in notes), notes
        assert not (api.get("configmaps", names.RESERVATIONS_CONFIGMAP, names.DEFAULT_NAMESPACE) or {}).get("data")
    finally:
        c.stop.set()


def test_a_pod_made_again_under_its_name_since_the_look_is_neither_released_nor_evicted(api, cluster):
    """A one-shot run releases gated pods as its look listed them, and a controller evicts victims
    as its cache has them: a pod deleted and made again under the same name since (a StatefulSet's)
    is another pod, which no plan looked at. Its release patch tests the uid read, and its
    eviction carries the uid as a precondition, so neither touches the new one."""
    from gpu_policy.actions.cycle import apply_plan_once
    from tests.kubernetes.controller_harness import cluster_of, gated_pod, released

    cluster_of(api, nodes=1, gpus=8, queues=[{"name": "a", "deserved": 8}])
    api.put(gated_pod("a-0", "a", gpus=8))
    c = cluster()
    observe = c.observe

    def observe_then_make_again():
        seen = observe()
        api.delete("pods", "a-0", "jobs")
        api.put(gated_pod("a-0", "a", gpus=8))  # the same name, another uid
        return seen

    c.observe = observe_then_make_again
    _, outcomes = apply_plan_once(c, execute=True, release=True)
    assert released(api) == {} and [(o.action, o.result) for o in outcomes] == [("release", "failed")]


def test_a_victim_made_again_under_its_name_is_not_evicted(api, cluster):
    from gpu_policy.kubernetes.read.pods import PodRef
    from gpu_policy.kubernetes.write.evict import evict_job
    from tests.kubernetes.test_act import eviction_cluster

    eviction_cluster(api)
    old = api.get("pods", "borrow-0", "a")
    ref = PodRef("a", "borrow-0", old["metadata"]["uid"])
    api.delete("pods", "borrow-0", "a")
    api.put({**old, "metadata": {k: v for k, v in old["metadata"].items() if k not in ("uid", "resourceVersion")}})
    made_again = api.get("pods", "borrow-0", "a")
    assert made_again["metadata"]["uid"] != ref.uid
    k8s = cluster()
    # as a cache that has not seen the new pod yet: the old object
    outcome = evict_job(k8s.client, "a/borrow", "preempt", "reclaimed", [ref], lambda: None, lambda ns, name: old)
    assert outcome.result == "gone" and api.evictions == []
    notes = api.get("pods", "borrow-0", "a")["metadata"].get("annotations") or {}
    assert names.PREEMPTED_ANNOTATION not in notes  # marked by name, then unmarked: not ours to stop
    # and the Eviction API itself refuses another pod than the uid given
    answer = k8s.client.evict_pod("a", "borrow-0", None, ref.uid)
    assert answer.status == 409 and api.evictions == []
