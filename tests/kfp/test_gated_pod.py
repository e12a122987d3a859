"""run_gated_pod on a live (fake) cluster through the real kubernetes 30.x client: the training
pod is created gated and labelled, the controller's release (simulated by the fake server's
controller hook) lets it run, and only the pipeline namespace's pod and Events are touched.
On the embedded cluster it plans in-process and creates nothing."""

import copy
from pathlib import Path

import pytest

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from gpu_policy.kfp import run_gated_pod  # noqa: E402
from gpu_policy.kubernetes.write.events import CONTROLLER  # noqa: E402
from tests.kubernetes.test_gated_step import POD_STEP  # noqa: E402
from gpu_policy.kubernetes.names import (ADMISSION_GATE, HOSTNAME_LABEL, JOB_LABEL, QUEUE_LABEL,  # noqa: E402
                                         REPLICAS_ANNOTATION)
from tests.kubernetes.fake_api import FakeKubernetes  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "gpu_policy" / "examples" / "training-cluster.yaml"
POD = {"metadata": {"name": "train-1"},
       "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": "trainer:1", "command": ["true"]}]}}


@pytest.fixture
def live(tmp_path, monkeypatch):
    """The fake API server, named by $KUBECONFIG's current context (namespace team-a)."""
    with FakeKubernetes() as api:
        api.add_resource("events.k8s.io", "v1", "events", "Event", True)
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(tmp_path / "kubeconfig", contexts=("fake",), namespace="team-a"))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        yield api


def controller(api, created: list, phase: str = "Succeeded"):
    """After the step's first look at its pod's Events: the contract's release and Event, then the pod runs to `phase`."""
    def turn():
        pod = api.get("pods", "train-1", "team-a")
        if pod is None or not any(g["name"] == ADMISSION_GATE for g in pod["spec"].get("schedulingGates") or []):
            return
        created.append(copy.deepcopy(pod))
        pod["spec"]["schedulingGates"] = [g for g in pod["spec"]["schedulingGates"] if g["name"] != ADMISSION_GATE]
        pod["spec"]["nodeSelector"] = {HOSTNAME_LABEL: "node-2"}
        pod["status"] = {"phase": phase}
        api.put(pod)
        api.put({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "team-a"},
                 "regarding": {"kind": "Pod", "name": "train-1", "namespace": "team-a"},
                 "reportingController": CONTROLLER, "reason": "GpuPolicyAdmitted",
                 "note": "node-2; team-a 0 -> 2 GPUs", "eventTime": "2026-11-26T05:00:00Z"})

    api.after_read[("events.k8s.io", "events")] = turn


def test_the_pod_is_created_gated_released_and_run(live, capsys):
    created = []
    controller(live, created)
    out = run_gated_pod.python_func(pod_manifest=POD, job_name="train", queue="team-a", gpus=2.0, poll_interval_s=0.01)
    assert tuple(out) == (True, "node-2", "node-2; team-a 0 -> 2 GPUs", "Succeeded")
    (pod,) = created
    assert pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]
    assert pod["metadata"]["labels"] == {JOB_LABEL: "train", QUEUE_LABEL: "team-a"}
    assert pod["metadata"]["annotations"] == {REPLICAS_ANNOTATION: "1"}
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"nvidia.com/gpu": "2"},
                                                         "limits": {"nvidia.com/gpu": "2"}}
    assert capsys.readouterr().out.splitlines()[:2] == [
        "pod team-a/train-1: waiting for admission",
        "pod team-a/train-1: released onto node-2 (GpuPolicyAdmitted: node-2; team-a 0 -> 2 GPUs)"]
    assert {r.path for r in live.requests} == {"/api/v1/namespaces/team-a/pods", "/api/v1/namespaces/team-a/pods/train-1",
                                              "/apis/events.k8s.io/v1/namespaces/team-a/events"}
    assert live.permissions_used() == POD_STEP


def test_a_trainer_that_saves_on_request_is_declared_and_shown_its_annotations(live):
    created = []
    controller(live, created)
    run_gated_pod.python_func(pod_manifest=POD, job_name="train", queue="team-a", gpus=1.0, poll_interval_s=0.01,
                              saves_on_request=True, checkpoint_every_s=600.0)
    (pod,) = created
    assert pod["metadata"]["annotations"] == {REPLICAS_ANNOTATION: "1", "gpu-policy.io/saves-on-request": "true",
                                              "gpu-policy.io/checkpoint-every-s": "600"}
    assert pod["spec"]["volumes"][0]["downwardAPI"]["items"] == [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["GPU_POLICY_TERMINATION_GRACE_S"] == "30" and env["GPU_POLICY_POD_INFO"] == "/etc/gpu-policy/pod/annotations"


def test_a_pod_not_admitted_in_time_fails_the_task_with_the_reason(live):
    with pytest.raises(SystemExit, match=r"^gpu-policy: pod team-a/train-1: waiting for admission: not admitted "
                                         r"within 0 s$"):
        run_gated_pod.python_func(pod_manifest=POD, job_name="train", queue="team-a", gpus=1.0, max_wait_s=0.0)
    assert live.get("pods", "train-1", "team-a")["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]


def test_a_failed_pod_fails_the_task(live):
    controller(live, [], phase="Failed")
    with pytest.raises(SystemExit, match="pod team-a/train-1 ended Failed, not Succeeded"):
        run_gated_pod.python_func(pod_manifest=POD, job_name="train", queue="team-a", gpus=1.0, poll_interval_s=0.01)


def test_on_the_embedded_cluster_it_plans_in_process_and_creates_nothing():
    out = run_gated_pod.python_func(pod_manifest=POD, job_name="train", queue="team-a", gpus=1.0,
                                    scenario_yaml=EXAMPLE.read_text(), cluster="k8s://nowhere")
    assert out.released and out.node and out.phase == "" and "start" in out.reason


def test_a_bad_manifest_fails_in_one_line(live):
    with pytest.raises(SystemExit, match=r"^gpu-policy: pod manifest: metadata.name: must be the pod's name, got None$"):
        run_gated_pod.python_func(pod_manifest={"spec": POD["spec"]}, job_name="train", queue="team-a", gpus=1.0)
    assert live.requests == []
