"""The operators and the sensor plan a live cluster named by `kubernetes_conn_id`: the cncf
provider's connection, opened by its own KubernetesHook, against the fake API server
through the real kubernetes 36.x client."""

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from airflow.exceptions import AirflowException  # noqa: E402

from gpu_policy import load_scenario  # noqa: E402
from gpu_policy.airflow.operators.plan import GpuPlanOperator  # noqa: E402
from gpu_policy.airflow.operators.telemetry import GpuTelemetryOperator  # noqa: E402
from gpu_policy.airflow.sensors.plan import GpuPlanSensor  # noqa: E402
from gpu_policy.kubernetes import names  # noqa: E402
from tests.airflow.test_operators import FakeTI  # noqa: E402
from tests.kubernetes.fake_api import FakeKubernetes  # noqa: E402
from tests.kubernetes.objects import gpu_pod, load_into  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "gpu_policy" / "examples" / "training-cluster.yaml"


@pytest.fixture
def live(tmp_path, monkeypatch):
    """The example cluster on the fake API server behind the Airflow connection `fake_k8s`."""
    with FakeKubernetes() as api:
        load_into(api, load_scenario(EXAMPLE), time.time(), namespace="team-a")
        config = api.kubeconfig(tmp_path / "kubeconfig")
        monkeypatch.setenv("AIRFLOW_CONN_FAKE_K8S", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": config, "namespace": "team-a"}}))
        yield api


def args(**overrides):
    return {"task_id": "plan", "kubernetes_conn_id": "fake_k8s", "job_name": "train", "team": "team-a", "gpus": 2,
            **overrides}


def test_plan_operator_plans_the_connection_s_cluster(live):
    ti = FakeTI()
    out = GpuPlanOperator(**args()).execute({"ti": ti})
    plan = ti.pushed["plan"]
    assert out["can_start"] and plan["observed"]["source"] == "k8s:// (connection fake_k8s)"
    assert any(j["name"] == "team-a/train" and j["action"] == "start" for j in plan["jobs"])  # the connection's namespace


def test_sensor_sees_gpus_freed_between_pokes(live):
    sensor = GpuPlanSensor(**args(gpus=8, replicas=2, job_name="big"))
    assert sensor.poke({"ti": FakeTI()}) is False  # team-b's 4 GPUs on gpu-node-1 are within its share
    for pod in live.objects("pods", "team-a"):
        if pod["spec"].get("nodeName") == "gpu-node-1":
            live.delete("pods", pod["metadata"]["name"], "team-a")  # its jobs finished
    ti = FakeTI()
    assert sensor.poke({"ti": ti}) is True and ti.pushed["node_affinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["gpu-node-1", "gpu-node-2"]
    assert live.calls("/api/v1/pods") == 2  # one look per poke


def test_telemetry_operator_without_prometheus_on_a_live_cluster(live):
    out = GpuTelemetryOperator(task_id="t", kubernetes_conn_id="fake_k8s").execute({})
    assert out == {"unavailable": "no DCGM connection given for a live cluster"}


def test_bad_input_from_the_cluster_is_one_line(live):
    """gpu-policy's own configuration is fatal when wrong (one odd pod is not: it is left out)."""
    live.put({"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": "gpu-policy"},
              "data": {names.QUEUES_KEY: "- {name: team-a, deserved: -1}"}})
    with pytest.raises(AirflowException) as e:
        GpuPlanOperator(**args()).execute({"ti": FakeTI()})
    assert str(e.value) == "ConfigMap gpu-policy/gpu-policy-queues: data.queues.yaml[0].deserved: must be >= 0, got -1"


def test_an_odd_pod_on_the_cluster_is_left_out_and_named(live):
    live.put(gpu_pod("team-a", "odd", labels={names.PREEMPTIBLE_LABEL: "maybe", names.QUEUE_LABEL: "team-a"}))
    ti = FakeTI()
    GpuPlanOperator(**args()).execute({"ti": ti})
    plan = ti.pushed["plan"]
    assert "team-a/odd" not in {j["name"] for j in plan["jobs"]}
    assert any(w.startswith('pod team-a/odd: metadata.labels.gpu-policy.io/preemptible: must be "true" or "false", '
                            'got "maybe"') for w in plan["warnings"]), plan["warnings"]


def test_one_cluster_at_a_time(live):
    with pytest.raises(AirflowException, match=r"GpuPlanOperator: give `scenario_path` \(the embedded cluster\) or "
                                               r"`kubernetes_conn_id` \(a live one\), not both"):
        GpuPlanOperator(**args(scenario_path=str(EXAMPLE))).execute({"ti": FakeTI()})


def test_the_plan_operator_reserves_the_step_s_gpus(live):
    ti = FakeTI()
    out = GpuPlanOperator(**args()).execute({"ti": ti})
    assert ti.pushed["pod_labels"] == {"gpu-policy.io/job": "train", "gpu-policy.io/queue": "team-a"}
    assert [o["action"] for o in ti.pushed["outcomes"]] == ["reserve"] and out["can_start"]
    assert list(live.get("configmaps", names.RESERVATIONS_CONFIGMAP, "gpu-policy")["data"]) == ["team-a.train"]
    live.reset_log()
    GpuPlanOperator(**args(job_name="other", execute_plan=False)).execute({"ti": FakeTI()})
    assert {r.method for r in live.requests} == {"GET"}  # only planned


def test_apply_operator_evicts_what_the_plan_reclaims(tmp_path, monkeypatch):
    from gpu_policy.airflow.operators.apply import GpuApplyPlanOperator
    from tests.conftest import SCENARIOS

    with FakeKubernetes() as api:
        load_into(api, load_scenario(SCENARIOS / "seed1-greedy-team.yaml"), time.time())
        monkeypatch.setenv("AIRFLOW_CONN_SEED1", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": api.kubeconfig(tmp_path / "kubeconfig")}}))
        out = GpuApplyPlanOperator(task_id="reconcile", kubernetes_conn_id="seed1").execute({})
        assert [(o["job"], o["result"]) for o in out["outcomes"]] == [("jobs/a-5", "done"), ("jobs/a-6", "done")]
        assert api.evictions == [("jobs", "a-5-0"), ("jobs", "a-6-0")] and out["summary"]["preemptions"] == 2
    with pytest.raises(AirflowException, match=r"`execute_plan` must be true, false or None"):
        GpuApplyPlanOperator(task_id="x", execute_plan="yes")


def test_the_sensor_waits_for_gpus_being_attached(tmp_path, monkeypatch, caplog):
    """A poke that starts the step on GPUs being attached says what it waits for; a later
    poke finds them attached (the planner's composition decision, issue 13 part B, is stood in for)."""
    from tests.kubernetes.fake_cdi import attach_for, composable_cluster

    with FakeKubernetes() as api:
        operator = composable_cluster(api, namespace="team-b")
        monkeypatch.setenv("AIRFLOW_CONN_CDI", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": api.kubeconfig(tmp_path / "kubeconfig"),
                                                  "namespace": "team-b"}}))
        sensor = GpuPlanSensor(**args(kubernetes_conn_id="cdi", team="team-b", gpus=4))
        with monkeypatch.context() as planner, caplog.at_level("INFO"):
            planner.setattr("gpu_policy.actions.step.plan", attach_for("team-b/train"))
            assert sensor.poke({"ti": FakeTI()}) is False
        assert "waiting for 4 A100-80GB to be attached to node-3: not picked up by the operator yet" in caplog.text
        operator.settle()  # the real planner from here: the step's reservation holds the GPUs now attached
        ti = FakeTI()
        assert sensor.poke({"ti": ti}) is True and ti.pushed["node_selector"] == {"kubernetes.io/hostname": "node-3"}
