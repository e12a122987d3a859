"""A pipeline step on a live cluster: its training pod is created gated and labelled, waits for
the controller's release (simulated here: the contract's patch and Event, applied by the test
while the step sleeps), and reads only its own pod and its Events in its own namespace."""

from pathlib import Path

import pytest
import yaml

from gpu_policy.errors import ClusterError, GpuPolicyError
from gpu_policy.kubernetes.write.events import CONTROLLER
from gpu_policy.kubernetes.write.gated_step import run_gated
from gpu_policy.kubernetes.write.step_client import STEP_PERMISSIONS, StepClient, open_step_client
from gpu_policy.kubernetes.names import ADMISSION_GATE, HOSTNAME_LABEL, JOB_LABEL, QUEUE_LABEL, REPLICAS_ANNOTATION
from tests.kubernetes.objects import gpu_pod

KUEUE_GATE = "kueue.x-k8s.io/admission"
#: what a pod's step sends (a TrainJob's sends more: tests/kubernetes/test_trainjob_step.py)
POD_STEP = {(m.permission.verb, m.permission.group, m.permission.resource)
            for m in (StepClient.create_own_pod, StepClient.read_own_pod, StepClient.list_pod_events)}


@pytest.fixture
def step(api, kubeconfig, fake_time):
    """The step's client (its kubeconfig context's namespace is `ml`), on the fake clocks."""
    api.add_resource("events.k8s.io", "v1", "events", "Event", True)
    client, namespace = open_step_client("k8s://", kubeconfig=kubeconfig, sleep=fake_time.sleep,
                                         monotonic=fake_time.monotonic)
    assert namespace == "ml"
    return client


def training_pod(name: str = "train-1", **spec) -> dict:
    pod = gpu_pod("ml", name, gpus=2, **spec)
    del pod["status"]
    return pod


def say(api, pod: str, reason: str, note: str, at: str, controller: str = CONTROLLER) -> None:
    """An events.k8s.io Event on the pod, as the controller writes it."""
    api.put({"apiVersion": "events.k8s.io/v1", "kind": "Event",
             "metadata": {"name": f"{pod}.{reason}.{at[-3:-1]}", "namespace": "ml"},
             "regarding": {"kind": "Pod", "name": pod, "namespace": "ml"}, "reportingController": controller,
             "reportingInstance": "gpu-policy-controller-0", "action": "Admission", "type": "Normal",
             "reason": reason, "note": note, "eventTime": at})


def release(api, name: str, node: str) -> None:
    """The controller's release: our gate out, the hostname selector in (other gates stay)."""
    pod = api.get("pods", name, "ml")
    pod["spec"]["schedulingGates"] = [g for g in pod["spec"]["schedulingGates"] if g["name"] != ADMISSION_GATE]
    pod["spec"]["nodeSelector"] = {**(pod["spec"].get("nodeSelector") or {}), HOSTNAME_LABEL: node}
    api.put(pod)


class Controller:
    """What the controller does while the step sleeps: one action per sleep, in order."""

    def __init__(self, fake_time, *actions):
        self.fake_time, self.actions = fake_time, list(actions)

    def sleep(self, seconds: float) -> None:
        self.fake_time.sleep(seconds)
        if self.actions:
            self.actions.pop(0)()


def test_the_pod_is_created_gated_and_labelled_and_proceeds_once_released(api, step, fake_time):
    controller = Controller(
        fake_time,
        lambda: say(api, "train-1", "GpuPolicyWaiting", "team-b is at its limit of 16 GPUs", "2026-11-26T05:00:01Z"),
        lambda: (release(api, "train-1", "node-3"),
                 say(api, "train-1", "GpuPolicyAdmitted", "node-3; team-b 14 -> 16 GPUs", "2026-11-26T05:00:09Z")))
    lines = []
    admission = run_gated(step, training_pod(), "nlp/llm-finetune", "team-b", 1, max_wait_s=600, poll_interval_s=5,
                          clock=fake_time.monotonic, sleep=controller.sleep, progress=lines.append)
    created = api.get("pods", "train-1", "ml")
    assert created["metadata"]["labels"] == {JOB_LABEL: "llm-finetune", QUEUE_LABEL: "team-b"}
    assert created["metadata"]["annotations"] == {REPLICAS_ANNOTATION: "1"}
    assert created["spec"]["nodeSelector"] == {HOSTNAME_LABEL: "node-3"}
    assert admission.released and admission.node == "node-3" and admission.waited_s == 10
    assert (admission.event, admission.reason) == ("GpuPolicyAdmitted", "node-3; team-b 14 -> 16 GPUs")
    assert lines == ["pod ml/train-1: waiting for admission",
                     "pod ml/train-1: waiting for admission (GpuPolicyWaiting: team-b is at its limit of 16 GPUs)",
                     "pod ml/train-1: released onto node-3 (GpuPolicyAdmitted: node-3; team-b 14 -> 16 GPUs)"]
    assert [r.method for r in api.requests].count("POST") == 1 and api.patches == []  # one create, no write after


def test_the_gate_is_set_at_create(api, step, fake_time):
    seen = []
    run_gated(step, training_pod(), "train", "team-a", 4, max_wait_s=0, poll_interval_s=5, clock=fake_time.monotonic,
              sleep=fake_time.sleep, progress=lambda _: seen.append(api.get("pods", "train-1", "ml")))
    (pod,) = seen
    assert pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]
    assert pod["metadata"]["annotations"][REPLICAS_ANNOTATION] == "4"


def test_other_controllers_gates_are_kept_and_do_not_count_as_ours(api, step, fake_time):
    controller = Controller(fake_time, lambda: release(api, "train-1", "node-1"))
    admission = run_gated(step, training_pod(schedulingGates=[{"name": KUEUE_GATE}]), "train", "team-a", 1,
                          max_wait_s=60, poll_interval_s=5, clock=fake_time.monotonic, sleep=controller.sleep)
    assert admission.released and admission.node == "node-1"
    assert api.get("pods", "train-1", "ml")["spec"]["schedulingGates"] == [{"name": KUEUE_GATE}]


def test_a_step_not_released_in_time_says_why_and_leaves_its_pod_waiting(api, step, fake_time):
    say(api, "train-1", "GpuPolicyWaiting", "older reason", "2026-11-26T05:00:01Z")
    controller = Controller(fake_time, lambda: say(api, "train-1", "GpuPolicyNotAdmitted",
                                                   "namespace ml may not use queue team-b", "2026-11-26T05:00:07Z"))
    admission = run_gated(step, training_pod(), "train", "team-b", 1, max_wait_s=30, poll_interval_s=10,
                          clock=fake_time.monotonic, sleep=controller.sleep)
    assert not admission.released and admission.node == ""
    assert (admission.event, admission.reason) == ("GpuPolicyNotAdmitted", "namespace ml may not use queue team-b")
    assert fake_time.sleeps == [10, 10, 10]  # bounded: never past max_wait_s
    assert api.get("pods", "train-1", "ml")["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]


def test_only_gpu_policy_s_events_give_the_reason(api, step, fake_time):
    say(api, "train-1", "FailedScheduling", "0/4 nodes are available", "2026-11-26T05:00:09Z",
        controller="default-scheduler")
    say(api, "train-1", "GpuPolicyWaiting", "waiting for 2 GPUs", "2026-11-26T05:00:01Z")
    say(api, "other", "GpuPolicyAdmitted", "not this pod", "2026-11-26T05:00:05Z")
    admission = run_gated(step, training_pod(), "train", "team-a", 1, max_wait_s=0, clock=fake_time.monotonic,
                          sleep=fake_time.sleep)
    assert (admission.event, admission.reason) == ("GpuPolicyWaiting", "waiting for 2 GPUs")


def test_a_retried_task_waits_for_the_pod_it_created_before(api, step, fake_time):
    api.put(training_pod() | {"spec": {**training_pod()["spec"], "schedulingGates": [],
                                       "nodeSelector": {HOSTNAME_LABEL: "node-2"}}})
    admission = run_gated(step, training_pod(), "train", "team-a", 1, max_wait_s=60, clock=fake_time.monotonic,
                          sleep=fake_time.sleep)
    assert admission.released and admission.node == "node-2" and fake_time.sleeps == []


def test_a_pod_deleted_while_waiting_is_an_error(api, step, fake_time):
    controller = Controller(fake_time, lambda: api.delete("pods", "train-1", "ml"))
    with pytest.raises(ClusterError, match=r"pod ml/train-1 was deleted while it waited for admission"):
        run_gated(step, training_pod(), "train", "team-a", 1, max_wait_s=60, clock=fake_time.monotonic,
                  sleep=controller.sleep)


def test_the_step_touches_only_its_own_pod_and_events_in_its_namespace(api, step, fake_time):
    api.put(gpu_pod("other-team", "theirs", node="node-1"))
    controller = Controller(fake_time, lambda: release(api, "train-1", "node-1"))
    run_gated(step, training_pod(), "train", "team-a", 1, max_wait_s=60, clock=fake_time.monotonic,
              sleep=controller.sleep)
    assert {(r.method, r.path) for r in api.requests} == {
        ("POST", "/api/v1/namespaces/ml/pods"), ("GET", "/api/v1/namespaces/ml/pods/train-1"),
        ("GET", "/apis/events.k8s.io/v1/namespaces/ml/events")}
    assert all(r.query.get("fieldSelector") == "regarding.kind=Pod,regarding.name=train-1"
               for r in api.requests if "events" in r.path)
    assert api.permissions_used() == POD_STEP
    assert all(p.own_namespace for p in STEP_PERMISSIONS)  # a Role in the step's namespace: nothing cluster-wide


def test_the_example_role_grants_a_step_what_it_sends_in_its_namespace_only():
    path = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "pipeline-step-role.yaml"
    (role,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert role["kind"] == "Role" and role["metadata"]["namespace"]
    granted = {(verb, group, resource) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    checkpoint_notes = ("patch", "", "pods")  # OwnPod.note_checkpoint, the training inside the pod
    assert granted == {(p.verb, p.group, p.resource) for p in STEP_PERMISSIONS} | {checkpoint_notes}


@pytest.mark.parametrize("manifest,match", [
    ({"spec": {"containers": [{"name": "c"}]}}, r"^pod manifest: metadata.name: must be the pod's name, got None$"),
    ({"metadata": {"name": "p"}, "spec": {}}, r"^pod manifest: spec.containers: must list at least one container$"),
    ({"metadata": {"name": "p"}, "spec": {"containers": ["c"]}}, "spec.containers: must list at least one container"),
])
def test_a_bad_manifest_is_one_line_before_any_request(api, step, manifest, match):
    with pytest.raises(GpuPolicyError, match=match):
        run_gated(step, manifest, "train", "team-a", 1, max_wait_s=0)
    assert api.requests == []


def test_a_trainer_that_saves_on_request_is_declared_and_shown_its_annotations(api, step, fake_time, monkeypatch):
    from gpu_policy.checkpoint import PreemptionGuard
    from gpu_policy.kubernetes.names import CHECKPOINT_EVERY_S_ANNOTATION, SAVES_ON_REQUEST_ANNOTATION
    from gpu_policy.kubernetes.write.gated_step import with_checkpoint_protocol

    mine = training_pod(terminationGracePeriodSeconds=130)
    mine["spec"]["containers"][0]["env"] = [{"name": "GPU_POLICY_TERMINATION_GRACE_S", "value": "5"},
                                            {"name": "MINE", "value": "kept"}]
    declared = with_checkpoint_protocol(mine, checkpoint_every_s=1800)
    assert with_checkpoint_protocol(declared, checkpoint_every_s=1800) == declared  # once, however often applied
    run_gated(step, declared, "train", "team-a", 1, max_wait_s=0, clock=fake_time.monotonic, sleep=fake_time.sleep)
    pod = api.get("pods", "train-1", "ml")  # the API server's rules accepted it
    assert pod["metadata"]["annotations"][SAVES_ON_REQUEST_ANNOTATION] == "true"
    assert pod["metadata"]["annotations"][CHECKPOINT_EVERY_S_ANNOTATION] == "1800"
    assert pod["spec"]["volumes"][-1] == {"name": "gpu-policy-pod-info", "downwardAPI": {"items": [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}
    trainer = pod["spec"]["containers"][0]
    assert trainer["volumeMounts"][-1] == {"name": "gpu-policy-pod-info", "mountPath": "/etc/gpu-policy/pod",
                                           "readOnly": True}
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer["env"]}
    assert env == {"MINE": "kept", "GPU_POLICY_POD_INFO": "/etc/gpu-policy/pod/annotations",
                   "GPU_POLICY_TERMINATION_GRACE_S": "130",  # the pod's own grace period, not a stale value
                   "POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
                   "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    for name in ("GPU_POLICY_POD_INFO", "GPU_POLICY_TERMINATION_GRACE_S"):
        monkeypatch.setenv(name, env[name])
    guard = PreemptionGuard()  # what the trainer in that pod makes of it
    assert guard.grace_period_s == 130 and guard.pod_info.path == "/etc/gpu-policy/pod/annotations"
    assert with_checkpoint_protocol(training_pod())["spec"]["containers"][0]["env"][1]["value"] == "30"
