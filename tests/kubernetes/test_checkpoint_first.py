"""Checkpoint first, then evict (spec "Preemption that loses no work"), round by round through the
one actuator the one-shot commands share with the controller, on the fake API server and the
fake clock: asked, answered, evicted with a grace period for the save; the deadline; a victim
stopped at its periodic checkpoint; withdrawal; the job that needs the GPUs gated meanwhile.
The trainer's side is stood in for by writing its annotation (tests/kubernetes/test_trainer_protocol.py
runs the real one)."""

import pytest

from gpu_policy.actions.cycle import apply_plan_once
from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Policy, Queue, Scenario
from gpu_policy.model.checkpointing import eviction_grace_s
from tests.kubernetes.controller_harness import described, gated_pod, released
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map, rfc3339

ASKED = f"metadata.annotations.{names.CHECKPOINT_REQUESTED_ANNOTATION}"


def reclaim_cluster(api, pods: int = 1, policy: Policy = Policy(), **notes) -> None:
    """team-b's gated `owner` needs the 8 GPUs team-a's gang `borrow` (`pods` pods) holds; the
    gang's pods carry `notes` (annotations, e.g. saves-on-request)."""
    api.put(node_object(Node(name="n", gpus=8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=0), Queue("team-b", deserved=8)],
                                       jobs=[], policy=policy)))
    api.put({"kind": "Namespace", "metadata": {"name": "b", "labels": {"gpu-policy.io/managed": "true"}}})
    for r in range(pods):
        api.put(gpu_pod("a", f"borrow-{r}", gpus=8 // pods, node="n",
                        labels={names.QUEUE_LABEL: "team-a", names.JOB_LABEL: "borrow"},
                        annotations={names.PREFIX + k.replace("_", "-"): v for k, v in notes.items()}))
    api.put(gated_pod("owner", "team-b", gpus=8, namespace="b"))


def annotations(api, pod: str) -> dict:
    return api.get("pods", pod, "a")["metadata"].get("annotations") or {}


def answer(api, pod: str, at: str) -> None:
    """What the trainer writes on its pod once it has saved."""
    obj = api.get("pods", pod, "a")
    obj["metadata"]["annotations"][names.LAST_CHECKPOINT_ANNOTATION] = at
    api.put(obj)


def results(outcomes) -> list[tuple[str, str, str]]:
    return [(o.action, o.job, o.result) for o in outcomes]


def reasons(api, namespace: str, pod: str) -> list[str]:
    return [e["reason"] for e in described(api, namespace, pod)]


def grace_given(api, pod: str) -> int:
    return api.get("pods", pod, "a")["metadata"]["deletionGracePeriodSeconds"]


def test_asked_then_evicted_on_the_answer_with_time_to_save_and_the_owner_released_after(api, cluster, fake_time):
    reclaim_cluster(api, saves_on_request="true", checkpoint_save_s="42.5")
    c = cluster()
    asked_at = rfc3339(fake_time.time())
    _, outcomes = apply_plan_once(c, execute=True, release=True)
    assert results(outcomes) == [("preempt", "a/borrow", "asked")] and api.evictions == []
    assert annotations(api, "borrow-0")[names.CHECKPOINT_REQUESTED_ANNOTATION] == asked_at
    (event,) = described(api, "a", "borrow-0")
    assert event["reason"] == "GpuPolicyCheckpointRequested" and "for b/owner" in event["note"]
    (waits,) = described(api, "b", "owner")
    assert waits["reason"] == "GpuPolicyWaiting" and waits["note"].startswith(
        f"WaitingForCheckpoint: waits for the GPUs of a/borrow (asked to save a checkpoint at {asked_at}")

    fake_time.now += 10
    _, outcomes = apply_plan_once(c, execute=True, release=True)  # no answer yet: nobody asked twice
    assert results(outcomes) == [("preempt", "a/borrow", "waiting")] and len(described(api, "a", "borrow-0")) == 1
    assert annotations(api, "borrow-0")[names.CHECKPOINT_REQUESTED_ANNOTATION] == asked_at

    answer(api, "borrow-0", asked_at)  # saved in the second it was asked: whole seconds compare as equal
    _, outcomes = apply_plan_once(c, execute=True, release=True)
    assert results(outcomes) == [("preempt", "a/borrow", "done")] and api.evictions == [("a", "borrow-0")]
    assert grace_given(api, "borrow-0") == 73  # 42.5 s to save + 30, above the pod's own 30
    assert reasons(api, "a", "borrow-0") == ["GpuPolicyCheckpointRequested", "GpuPolicyPreempted"]
    assert released(api, "b") == {}  # its GPUs are not free until the pod has ended

    plan, _ = apply_plan_once(c, execute=True, release=True)
    assert plan.job("b/owner").code == "NotEnoughFreeGpus" and released(api, "b") == {}
    api.finish_terminating()
    apply_plan_once(c, execute=True, release=True)
    assert released(api, "b") == {"owner": "n"}


def test_a_gang_goes_once_every_pod_has_answered(api, cluster, fake_time):
    reclaim_cluster(api, pods=2, saves_on_request="true")
    c = cluster()
    apply_plan_once(c, execute=True)
    asked_at = annotations(api, "borrow-0")[names.CHECKPOINT_REQUESTED_ANNOTATION]
    answer(api, "borrow-0", asked_at)
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "waiting")]
    answer(api, "borrow-1", rfc3339(fake_time.time() + 5))
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "done")]
    assert sorted(api.evictions) == [("a", "borrow-0"), ("a", "borrow-1")]


@pytest.mark.parametrize("save_s,deadline_s,waits_s", [(None, 600, 60), ("20", 600, 60), ("45", 600, 90),
                                                       ("400", 600, 600), ("45", 50, 50)])
def test_without_an_answer_it_goes_at_the_deadline(api, cluster, fake_time, save_s, deadline_s, waits_s):
    notes = {"saves_on_request": "true", **({"checkpoint_save_s": save_s} if save_s else {})}
    reclaim_cluster(api, **notes)
    c = cluster(checkpoint_deadline_s=deadline_s)
    fake_time.now = float(int(fake_time.now))  # asked on a whole second
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "asked")]
    answer(api, "borrow-0", rfc3339(fake_time.time() - 1))  # a periodic checkpoint from before the request
    fake_time.now += waits_s - 0.5
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "waiting")]
    fake_time.now += 0.5
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "done")]
    assert grace_given(api, "borrow-0") == (30 if save_s is None else max(30, min(float(save_s) + 30, deadline_s)))


@pytest.mark.parametrize("own,save_s,given", [(30, None, 30), (None, "100", 130), (200, "100", 200),
                                              (30, "1000", 600), (900, "1000", 900)])
def test_every_victim_gets_time_to_save_on_sigterm(api, cluster, own, save_s, given):
    """A victim that does not save on request is evicted at once, with the larger of its own grace
    period and its save time + 30 s (that one capped by checkpoint_deadline_s)."""
    reclaim_cluster(api, **({"checkpoint_save_s": save_s} if save_s else {}))
    pod = api.get("pods", "borrow-0", "a")
    if own is None:
        pod["spec"].pop("terminationGracePeriodSeconds", None)
    else:
        pod["spec"]["terminationGracePeriodSeconds"] = own
    api.put(pod)
    assert results(apply_plan_once(cluster(), execute=True)[1]) == [("preempt", "a/borrow", "done")]
    assert grace_given(api, "borrow-0") == given


def test_the_one_rule_of_the_grace_period_keeps_a_pod_s_own_longer_one():
    """The rule the controller and the simulator share (model/checkpointing.py): only `save_s + 30`
    is capped by checkpoint_deadline_s, a pod's own longer grace period is kept, and a save time
    not known gives the pod's own (the simulator's copy had capped the pod's own too)."""
    assert eviction_grace_s(1000, 900, 600) == 900 and eviction_grace_s(1000, 30, 600) == 600
    assert eviction_grace_s(None, 5) == 5 and eviction_grace_s(0, 5) == 30 and eviction_grace_s(45, 30, 50) == 50


def test_a_victim_whose_checkpoint_is_due_goes_once_it_has_saved(api, cluster, fake_time):
    fake_time.now = float(int(fake_time.now))
    now = fake_time.time()
    reclaim_cluster(api, policy=Policy(reclaim_wait_s=300), checkpoint_every_s="1800",
                    last_checkpoint=rfc3339(now - 1650), checkpoint_save_s="20")
    c = cluster()
    plan, outcomes = apply_plan_once(c, execute=True, release=True)
    assert plan.job("a/borrow").evict_after_s == 150 and results(outcomes) == [("preempt", "a/borrow", "awaited")]
    marks = annotations(api, "borrow-0")
    assert (marks[names.CHECKPOINT_AWAITED_ANNOTATION], marks[names.EVICT_BY_ANNOTATION]) == (
        rfc3339(now), rfc3339(now + 150 + 20 + 30))
    assert names.CHECKPOINT_REQUESTED_ANNOTATION not in marks  # nobody asks a trainer that does not answer
    assert "stopped at its periodic checkpoint" in described(api, "b", "owner")[0]["note"]
    fake_time.now += 160  # due, and saving: past evict_after_s, the plan no longer defers; the marks hold
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "waiting")]
    answer(api, "borrow-0", rfc3339(fake_time.time()))
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "done")]
    assert grace_given(api, "borrow-0") == 50


def test_a_victim_awaited_in_vain_goes_at_evict_by(api, cluster, fake_time):
    fake_time.now = float(int(fake_time.now))
    now = fake_time.time()
    reclaim_cluster(api, policy=Policy(reclaim_wait_s=300), checkpoint_every_s="1800",
                    last_checkpoint=rfc3339(now - 1650))
    c = cluster()
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "awaited")]
    fake_time.now += 150 + 30 - 1
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "waiting")]
    fake_time.now += 1
    assert results(apply_plan_once(c, execute=True)[1]) == [("preempt", "a/borrow", "done")]


def test_a_request_a_later_plan_drops_is_withdrawn(api, cluster):
    reclaim_cluster(api, pods=2, saves_on_request="true")
    c = cluster()
    apply_plan_once(c, execute=True)
    api.delete("pods", "owner", "b")  # the owner gave up
    plan, dry = apply_plan_once(c, execute=False)
    assert plan.job("a/borrow").action == "keep" and results(dry) == [("withdraw", "a/borrow", "dry run")]
    assert names.CHECKPOINT_REQUESTED_ANNOTATION in annotations(api, "borrow-1")
    _, outcomes = apply_plan_once(c, execute=True)
    assert results(outcomes) == [("withdraw", "a/borrow", "done")] and outcomes[0].pods == ["a/borrow-0", "a/borrow-1"]
    assert all(names.CHECKPOINT_REQUESTED_ANNOTATION not in annotations(api, p) for p in ("borrow-0", "borrow-1"))
    assert apply_plan_once(c, execute=True)[1] == [] and api.evictions == []


def test_a_dry_run_says_what_it_would_do_and_writes_nothing(api, cluster):
    reclaim_cluster(api, saves_on_request="true")
    api.reset_log()
    _, outcomes = apply_plan_once(cluster(), execute=False, release=True)
    (outcome,) = outcomes
    assert (outcome.result, outcome.detail.split(":")[0]) == ("dry run", "would be asked")
    assert {r.method for r in api.requests} == {"GET"}


def test_a_step_on_the_gpus_of_a_victim_asked_to_save_waits_and_reserves_nothing(api, cluster):
    from gpu_policy.actions.cycle import wait_for_step
    from gpu_policy.model import Job

    reclaim_cluster(api, saves_on_request="true")
    api.delete("pods", "owner", "b")
    decision = wait_for_step(cluster(), Job("b/step", "team-b", 8), execute=True)
    assert not decision.can_start and decision.reason.startswith("WaitingForCheckpoint: waits for the GPUs of a/borrow")
    assert api.get("configmaps", names.RESERVATIONS_CONFIGMAP, names.DEFAULT_NAMESPACE) is None


@pytest.mark.parametrize("notes", [{"last_checkpoint": "2026-01-31 12:00:00"}, {"checkpoint_save_s": "fast"}])
def test_a_running_pod_whose_checkpoint_annotation_does_not_read_still_holds_its_gpus(api, cluster, notes):
    """A bad annotation on a running pod (its trainer's, not gpu-policy's) must not hide the GPUs
    it holds: it is counted as unmanaged, with a warning naming the field, and never touched; the
    job that wants them waits rather than being released onto a full node."""
    reclaim_cluster(api, **notes)
    plan, outcomes = apply_plan_once(cluster(), execute=True, release=True)
    assert released(api, "b") == {} and api.evictions == [] and results(outcomes) == []
    assert plan.job("b/owner").action == "wait"
    field = "metadata.annotations.gpu-policy.io/" + next(iter(notes)).replace("_", "-")
    assert [w for w in plan.warnings if w.startswith("pod a/borrow-0") and field in w and "counted as unmanaged" in w]


def test_a_one_shot_run_that_evicts_says_why_on_the_victim_first(api, cluster):
    """`apply --execute` without `--release` (no admission) still writes GpuPolicyPreempted on
    each victim pod before it evicts it, as the controller does."""
    reclaim_cluster(api)
    _, outcomes = apply_plan_once(cluster(), execute=True)
    assert results(outcomes) == [("preempt", "a/borrow", "done")] and api.evictions == [("a", "borrow-0")]
    assert reasons(api, "a", "borrow-0") == ["GpuPolicyPreempted"]
    event = next(r for r in api.requests if r.method == "POST" and r.path.endswith("/events"))
    eviction = next(r for r in api.requests if r.method == "POST" and r.path.endswith("/eviction"))
    assert api.requests.index(event) < api.requests.index(eviction)
    assert released(api, "b") == {}  # releasing stays the controller's (or --release's)


def test_a_claimant_with_no_gated_pod_leaves_nothing_behind_in_the_controller(api, cluster, fake_time):
    """A pending pod without gpu-policy's gate that the plan starts on a victim's GPUs: no release
    of the controller's ends its wait, so the controller keeps nothing of it (a long-running
    controller would otherwise keep one entry per such job for its lifetime)."""
    from tests.kubernetes.controller_harness import new_controller, settle

    reclaim_cluster(api)
    api.delete("pods", "owner", "b")
    api.put(gated_pod("owner", "team-b", gpus=8, namespace="b", gates=()))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: api.evictions != [])
        api.finish_terminating()
        api.delete("pods", "owner", "b")
        settle(c, fake_time, turns=4)
        assert c.witness.reclaimed_at == {} and c.witness._claimant_of == {}
    finally:
        c.shut_down()
