"""GatedKubernetesPodOperator on a live (fake) cluster through the cncf provider's connection
and the real kubernetes 36.x client: its pod is built gated and labelled, and it waits for the
controller's release (simulated here), reading only its own pod and Events in its namespace."""

import json

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from airflow.exceptions import AirflowException  # noqa: E402
from kubernetes.client import ApiClient  # noqa: E402

from gpu_policy.airflow.operators.gated_pod import GatedKubernetesPodOperator  # noqa: E402
from gpu_policy.kubernetes.write.events import CONTROLLER  # noqa: E402
from tests.kubernetes.test_gated_step import POD_STEP  # noqa: E402
from gpu_policy.kubernetes.names import (ADMISSION_GATE, FRACTION_ANNOTATION, HOSTNAME_LABEL, JOB_LABEL,  # noqa: E402
                                         QUEUE_LABEL, REPLICAS_ANNOTATION)
from tests.kubernetes.fake_api import FakeKubernetes  # noqa: E402


@pytest.fixture
def live(tmp_path, monkeypatch):
    """The fake API server behind the Airflow connection `fake_k8s` (namespace `ml`)."""
    with FakeKubernetes() as api:
        api.add_resource("events.k8s.io", "v1", "events", "Event", True)
        config = api.kubeconfig(tmp_path / "kubeconfig")
        monkeypatch.setenv("AIRFLOW_CONN_FAKE_K8S", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": config, "namespace": "ml"}}))
        yield api


def operator(**overrides) -> GatedKubernetesPodOperator:
    args = {"task_id": "train", "name": "train-1", "namespace": "ml", "image": "gpu-policy:0.1.0",
            "kubernetes_conn_id": "fake_k8s", "job_name": "nlp/llm-finetune", "team": "team-b", "gpus": 2,
            "replicas": 1, "admission_timeout_s": 0, "admission_poll_s": 5, "random_name_suffix": False}
    return GatedKubernetesPodOperator(**{**args, **overrides})


def built(op: GatedKubernetesPodOperator) -> dict:
    return ApiClient().sanitize_for_serialization(op.build_pod_request_obj(dry_run=True))


def test_the_pod_is_built_gated_labelled_and_asking_for_its_gpus():
    pod = built(operator(labels={"team": "nlp"}))
    assert pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]
    assert pod["metadata"]["labels"][JOB_LABEL] == "llm-finetune" and pod["metadata"]["labels"]["team"] == "nlp"
    assert pod["metadata"]["labels"][QUEUE_LABEL] == "team-b"
    assert pod["metadata"]["annotations"][REPLICAS_ANNOTATION] == "1"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]


def test_a_fraction_is_an_annotation_not_a_whole_gpu():
    pod = built(operator(gpus=0.5))
    assert pod["metadata"]["annotations"][FRACTION_ANNOTATION] == "0.5"
    assert "nvidia.com/gpu" not in json.dumps(pod["spec"]["containers"])


def test_a_trainer_that_saves_on_request_is_declared_and_shown_its_annotations():
    pod = built(operator(saves_on_request=True, checkpoint_every_s=900, termination_grace_period=120))
    assert pod["metadata"]["annotations"]["gpu-policy.io/saves-on-request"] == "true"
    assert pod["metadata"]["annotations"]["gpu-policy.io/checkpoint-every-s"] == "900"
    assert pod["spec"]["volumes"] == [{"name": "gpu-policy-pod-info", "downwardAPI": {"items": [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}]
    trainer = pod["spec"]["containers"][0]
    assert {"name": "gpu-policy-pod-info", "mountPath": "/etc/gpu-policy/pod", "readOnly": True} in trainer["volumeMounts"]
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["GPU_POLICY_TERMINATION_GRACE_S"] == "120" and env["GPU_POLICY_POD_INFO"] == "/etc/gpu-policy/pod/annotations"
    assert pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]  # the rest as before
    assert "gpu-policy.io/saves-on-request" not in built(operator())["metadata"]["annotations"]


@pytest.mark.parametrize("bad,match", [({"gpus": 1.5}, "`gpus` must be > 0"),
                                       ({"admission_poll_s": 0}, "`admission_poll_s` must be a number of seconds > 0"),
                                       ({"admission_timeout_s": -1}, "`admission_timeout_s` must be")])
def test_bad_arguments_fail_at_once_naming_the_argument(bad, match):
    with pytest.raises(AirflowException, match=match):
        operator(**bad)


def created(live, op) -> dict:
    """The pod as KubernetesPodOperator would create it."""
    pod = built(op)
    live.put({**pod, "apiVersion": "v1", "kind": "Pod"})
    return pod


def test_the_step_proceeds_once_released_and_says_why(live):
    op = operator()
    pod = created(live, op)
    stored = live.get("pods", "train-1", "ml")
    stored["spec"]["schedulingGates"] = []
    stored["spec"]["nodeSelector"] = {HOSTNAME_LABEL: "node-3"}
    live.put(stored)
    live.put({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1", "namespace": "ml"},
              "regarding": {"kind": "Pod", "name": "train-1", "namespace": "ml"}, "reportingController": CONTROLLER,
              "reason": "GpuPolicyAdmitted", "note": "node-3; team-b 14 -> 16 GPUs", "eventTime": "2026-11-26T05:00:00Z"})
    live.reset_log()
    admission = op.wait_for_admission(op.build_pod_request_obj(dry_run=True))
    assert admission["released"] and admission["node"] == "node-3"
    assert admission["reason"] == "node-3; team-b 14 -> 16 GPUs" and pod["metadata"]["name"] == "train-1"
    assert {r.path for r in live.requests} == {"/api/v1/namespaces/ml/pods/train-1",
                                               "/apis/events.k8s.io/v1/namespaces/ml/events"}
    assert live.permissions_used() <= POD_STEP


def test_a_step_not_released_in_time_fails_with_the_reason(live):
    op = operator()
    created(live, op)
    live.put({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1", "namespace": "ml"},
              "regarding": {"kind": "Pod", "name": "train-1", "namespace": "ml"}, "reportingController": CONTROLLER,
              "reason": "GpuPolicyWaiting", "note": "team-b is at its limit of 16 GPUs",
              "eventTime": "2026-11-26T05:00:00Z"})
    with pytest.raises(AirflowException, match=r"pod ml/train-1 was not admitted within 0 s: team-b is at its limit"):
        op.wait_for_admission(op.build_pod_request_obj(dry_run=True))
    assert op.admission["released"] is False and op.admission["event"] == "GpuPolicyWaiting"
