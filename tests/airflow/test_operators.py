"""Operators, sensor and hook called directly: outputs, and clear errors on bad input."""

import json

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from airflow.exceptions import AirflowException  # noqa: E402

from gpu_policy.airflow.hooks.dcgm import DcgmHook  # noqa: E402
from gpu_policy.airflow.operators.plan import GpuPlanOperator  # noqa: E402
from gpu_policy.airflow.operators.pod import PlannedKubernetesPodOperator  # noqa: E402
from gpu_policy.airflow.operators.telemetry import GpuTelemetryOperator  # noqa: E402
from gpu_policy.airflow.operators.training import CheckpointedTrainingOperator  # noqa: E402
from gpu_policy.airflow.sensors.plan import GpuPlanSensor  # noqa: E402
from tests.conftest import SCENARIOS  # noqa: E402

EXAMPLE = str(SCENARIOS.parent.parent / "gpu_policy" / "examples" / "training-cluster.yaml")


class FakeTI:
    def __init__(self, pulled=None):
        self.pushed, self.pulled = {}, pulled or {}

    def xcom_push(self, key, value):
        json.dumps(value)  # XComs must be JSON
        self.pushed[key] = value

    def xcom_pull(self, task_ids, key):
        return self.pulled.get(key)


def plan_args(**overrides):
    return {"task_id": "plan", "scenario_path": EXAMPLE, "job_name": "train", "team": "team-a", "gpus": 2, **overrides}


def test_plan_operator_pushes_the_decision():
    ti = FakeTI()
    out = GpuPlanOperator(**plan_args()).execute({"ti": ti})
    assert out["can_start"] and out["gpu_count"] == 2 and ti.pushed["plan"]["kind"] == "Plan"
    assert ti.pushed["node_selector"] == {"kubernetes.io/hostname": out["nodes"][0]}
    assert ti.pushed["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_sensor_waits_then_fails_on_never():
    ti = FakeTI()
    # a 2 x 5-GPU gang: only one node has 5 GPUs free now
    assert GpuPlanSensor(**plan_args(gpus=5, replicas=2)).poke({"ti": ti}) is False and ti.pushed == {}
    with pytest.raises(AirflowException, match="train will never start: can never fit: needs 16 GPUs on one node"):
        GpuPlanSensor(**plan_args(gpus=16)).poke({"ti": FakeTI()})


def test_telemetry_operator():
    out = GpuTelemetryOperator(task_id="t", scenario_path=EXAMPLE).execute({})
    assert out["source"] == "simulated" and len(out["gpus"]) == 16


@pytest.mark.parametrize("overrides,message", [
    ({"gpus": -1}, r"GpuPlanOperator: `gpus` must be > 0 \(a fraction below 1, or whole GPUs\), got -1"),
    ({"gpus": 1.5}, r"`gpus` must be > 0 \(a fraction below 1, or whole GPUs\), got 1.5"),
    ({"replicas": 0}, r"`replicas` must be a whole number >= 1, got 0"),
])
def test_bad_arguments_fail_in_init(overrides, message):
    with pytest.raises(AirflowException, match=message):
        GpuPlanOperator(**plan_args(**overrides))


def test_bad_templated_arguments_fail_in_execute(tmp_path):
    with pytest.raises(AirflowException, match=r"nope.yaml: cannot read the file"):
        GpuPlanOperator(**plan_args(scenario_path=str(tmp_path / "nope.yaml"))).execute({"ti": FakeTI()})
    with pytest.raises(AirflowException, match=r"queue: 'team-z' is not a queue of the cluster"):
        GpuPlanOperator(**plan_args(team="team-z")).execute({"ti": FakeTI()})
    with pytest.raises(AirflowException, match=r"`job_name` is empty"):
        GpuPlanOperator(**plan_args(job_name="")).execute({"ti": FakeTI()})


def test_pod_refuses_without_a_grant():
    pod = PlannedKubernetesPodOperator(task_id="p", plan_task_id="plan", name="x", image="python:3.11-slim", dry_run=True)
    with pytest.raises(AirflowException, match="no plan in XCom from task `plan`"):
        pod.execute({"ti": FakeTI()})
    with pytest.raises(AirflowException, match="the plan does not let this step start: busy"):
        pod.execute({"ti": FakeTI({"can_start": False, "reason": "busy"})})


def test_training_operator(tmp_path):
    op = CheckpointedTrainingOperator(task_id="t", checkpoint_uri=str(tmp_path), total_steps=20, steps_per_run=15)
    assert op.execute({})["step_reached"] == 15 and op.execute({})["step_reached"] == 20
    with pytest.raises(AirflowException, match=r"`steps_per_run` must be a whole number >= 1, got 0"):
        CheckpointedTrainingOperator(task_id="t", checkpoint_uri="x", total_steps=1, steps_per_run=0)
    with pytest.raises(AirflowException, match=r"step_function: must be 'module:function'"):
        CheckpointedTrainingOperator(task_id="t", checkpoint_uri=str(tmp_path / "b"), total_steps=1, steps_per_run=1,
                                     step_function="nope").execute({})


def test_hook_settings_and_errors(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_DCGM_DEFAULT", json.dumps(
        {"conn_type": "gpu_policy_dcgm", "host": "127.0.0.1", "port": 9091, "extra": {"window_s": 300, "retries": 1}}))
    source = DcgmHook(timeout_s=2).get_conn()
    assert source.url == "http://127.0.0.1:9091"
    assert (source.settings.window_s, source.settings.retries, source.settings.timeout_s) == (300, 1, 2)
    monkeypatch.setenv("AIRFLOW_CONN_NO_HOST", json.dumps({"conn_type": "gpu_policy_dcgm"}))
    with pytest.raises(AirflowException, match="connection `no_host` has no host"):
        DcgmHook("no_host").get_conn()
    with pytest.raises(AirflowException, match=r"DcgmHook: unknown settings \['windo'\]"):
        DcgmHook(windo=3)


def test_monitoring_down_is_a_warning_not_a_failure(monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_DOWN", json.dumps(
        {"conn_type": "gpu_policy_dcgm", "host": "127.0.0.1", "port": port,
         "extra": {"retries": 0, "timeout_s": 0.5, "backoff_s": 0.01}}))
    ti = FakeTI()
    out = GpuPlanOperator(**plan_args(dcgm_conn_id="down")).execute({"ti": ti})
    assert out["can_start"]
    assert ti.pushed["plan"]["warnings"][0].startswith("planned without telemetry: Prometheus at")
