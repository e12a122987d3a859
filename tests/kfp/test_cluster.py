"""The KFP components plan a live cluster named by `cluster` (the fake API server through the
real kubernetes 30.x client), and fail in one line on bad input from it."""

import json
import time
from pathlib import Path

import pytest

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from kfp import local  # noqa: E402

from gpu_policy import load_scenario  # noqa: E402
from gpu_policy.kfp import collect_gpu_telemetry, components, plan_gpu_allocation  # noqa: E402
from gpu_policy.kubernetes import names  # noqa: E402
from tests.kubernetes.fake_api import FakeKubernetes  # noqa: E402
from tests.kubernetes.objects import gpu_pod, load_into  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "gpu_policy" / "examples" / "training-cluster.yaml"


class FakeArtifact:
    def __init__(self, path):
        self.path = str(path)


@pytest.fixture
def live(tmp_path, monkeypatch):
    """The example cluster on the fake API server, named by $KUBECONFIG's current context."""
    with FakeKubernetes() as api:
        load_into(api, load_scenario(EXAMPLE), time.time(), namespace="team-a")
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(tmp_path / "kubeconfig", contexts=("fake",), namespace="team-a"))
        yield api


def test_plan_gpu_allocation_plans_the_cluster(live, tmp_path):
    out = plan_gpu_allocation.python_func(job_name="team-a/train", queue="team-a", gpus=2, cluster="k8s://fake",
                                          plan=FakeArtifact(tmp_path / "plan.json"))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert out.can_start and out.gpu_count == 2 and "start on" in out.reason
    assert plan["observed"]["source"] == "k8s://fake" and plan["observed"]["api_calls"] == 5
    assert any(j["name"] == "team-a/train" and j["action"] == "start" for j in plan["jobs"])
    assert live.calls("/api/v1/pods") == 1


def test_collect_gpu_telemetry_on_a_live_cluster_without_prometheus(live, tmp_path):
    summary = collect_gpu_telemetry.python_func(telemetry=FakeArtifact(tmp_path / "t.json"), cluster="k8s://")
    assert summary == "no Prometheus URL given for a live cluster"
    assert json.loads((tmp_path / "t.json").read_text()) == {"unavailable": summary}


def test_bad_input_from_the_cluster_fails_in_one_line(live, tmp_path):
    """gpu-policy's own configuration is fatal when wrong (one odd pod is not: it is left out)."""
    live.put({"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": "gpu-policy"},
              "data": {names.QUEUES_KEY: "- {name: team-a, deserved: -1}"}})
    with pytest.raises(SystemExit) as e:
        plan_gpu_allocation.python_func(job_name="train", queue="team-a", gpus=1, plan=FakeArtifact(tmp_path / "p"))
    assert str(e.value) == ("gpu-policy: ConfigMap gpu-policy/gpu-policy-queues: data.queues.yaml[0].deserved: "
                            "must be >= 0, got -1")


def test_an_odd_pod_on_the_cluster_is_left_out(live, tmp_path):
    live.put(gpu_pod("team-a", "odd", gpus=None, labels={names.QUEUE_LABEL: "team-a"},
                     annotations={names.FRACTION_ANNOTATION: "1.5"}))
    plan_gpu_allocation.python_func(job_name="train", queue="team-a", gpus=1, plan=FakeArtifact(tmp_path / "p"))
    plan = json.loads((tmp_path / "p").read_text())
    assert "team-a/odd" not in {j["name"] for j in plan["jobs"]}
    assert any(w.startswith("pod team-a/odd: metadata.annotations.gpu-policy.io/gpu-fraction: ") for w in plan["warnings"])


def test_the_component_runs_against_the_cluster_with_kfp_local(live, tmp_path):
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"))
    task = components().plan_gpu_allocation(job_name="train", queue="team-a", gpus=8.0)
    assert task.outputs["can_start"] is True and task.outputs["gpu_count"] == 8
    plan = json.loads(Path(task.outputs["plan"].path).read_text())
    assert plan["observed"]["source"] == "k8s://"


def test_plan_gpu_allocation_reserves_the_step_unless_told_not_to(live, tmp_path):
    live.reset_log()
    plan_gpu_allocation.python_func(job_name="dry", queue="team-a", gpus=2, plan=FakeArtifact(tmp_path / "p"),
                                    execute=False)
    assert {r.method for r in live.requests} == {"GET"}  # planned only
    plan_gpu_allocation.python_func(job_name="train", queue="team-a", gpus=2, plan=FakeArtifact(tmp_path / "p"))
    reserved = live.get("configmaps", names.RESERVATIONS_CONFIGMAP, "gpu-policy")["data"]
    assert list(reserved) == ["team-a.train"]  # the pipeline's namespace: the kubeconfig context's here


def test_the_training_step_outside_a_cluster_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    from gpu_policy.kfp import checkpointed_train_step

    out = checkpointed_train_step.python_func(checkpoint_uri=str(tmp_path / "c"), total_steps=5, steps_per_run=5,
                                              job_name="train", queue="team-a")
    assert out.step_reached == 5


def test_plan_gpu_allocation_waits_for_gpus_being_attached(tmp_path, monkeypatch):
    """On composable infrastructure the component waits for the GPUs its step starts on (the
    planner's composition decision, issue 13 part B, is stood in for)."""
    from tests.kubernetes.fake_cdi import attach_for, composable_cluster

    with FakeKubernetes() as api:
        composable_cluster(api, namespace="team-b")
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(tmp_path / "kubeconfig", contexts=("fake",), namespace="team-b"))
        monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("team-b/train"))
        out = plan_gpu_allocation.python_func(job_name="train", queue="team-b", gpus=4, plan=FakeArtifact(tmp_path / "p"),
                                              max_wait_s=60, poll_interval_s=0.01)
        assert out.can_start and out.gpu_count == 4
        request = api.get("composabilityrequests", "gpu-policy-node-3-a100-80gb", group="cro.hpsys.ibm.ie.com")
        assert request["status"]["state"] == "Running"
