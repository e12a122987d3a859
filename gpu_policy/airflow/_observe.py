"""Shared by the operators and the sensor: load the snapshot, observe, decide."""

from __future__ import annotations

import logging

from airflow.exceptions import AirflowException

from gpu_policy import Job, ScenarioError, load_scenario
from gpu_policy.model import Scenario
from gpu_policy.step import StepDecision, decide_step
from gpu_policy.telemetry import ClusterSignals, DcgmSource, SimulatedDcgmSource, TelemetrySettings, observe

log = logging.getLogger(__name__)


def load(scenario_path: str) -> Scenario:
    try:
        return load_scenario(scenario_path)
    except ScenarioError as e:
        raise AirflowException(str(e)) from e


def telemetry_source(scenario: Scenario, dcgm_conn_id: str | None) -> tuple[DcgmSource, TelemetrySettings]:
    """The connection's Prometheus with its settings, or simulated telemetry when there is none."""
    if dcgm_conn_id:
        from gpu_policy.airflow.hooks.dcgm import DcgmHook

        source = DcgmHook(dcgm_conn_id).get_conn()
        return source, source.settings
    return SimulatedDcgmSource(scenario), TelemetrySettings()


def signals_for(scenario: Scenario, dcgm_conn_id: str | None) -> tuple[ClusterSignals | None, str | None]:
    """`gpu_policy.telemetry.observe` through the connection; a warning is also logged."""
    signals, warning = observe(scenario, *telemetry_source(scenario, dcgm_conn_id))
    if warning:
        log.warning("%s", warning)
    return signals, warning


def decide(scenario_path: str, job: Job, dcgm_conn_id: str | None) -> StepDecision:
    scenario = load(scenario_path)
    signals, warning = signals_for(scenario, dcgm_conn_id)
    try:
        decision = decide_step(scenario, job, signals)
    except ValueError as e:
        raise AirflowException(str(e)) from e
    if warning:
        decision.plan.warnings.append(warning)
    return decision


class StepJobArgs:
    """The step's job, as GpuPlanOperator and GpuPlanSensor take it."""

    template_fields = ("scenario_path", "job_name", "team", "dcgm_conn_id")

    def set_job_args(self, scenario_path: str, job_name: str, team: str, gpus: float, replicas: int,
                     priority: int, dcgm_conn_id: str | None) -> None:
        check_job_args(type(self).__name__, gpus, replicas, priority)
        self.scenario_path = scenario_path
        self.job_name = job_name
        self.team = team
        self.gpus = gpus
        self.replicas = replicas
        self.priority = priority
        self.dcgm_conn_id = dcgm_conn_id

    def decide(self) -> StepDecision:
        # templated fields hold their rendered values only now, so they are checked here
        for name in ("scenario_path", "job_name", "team"):
            if not getattr(self, name):
                raise AirflowException(f"{type(self).__name__}: `{name}` is empty")
        job = Job(name=self.job_name, queue=self.team, gpus=self.gpus, replicas=self.replicas, priority=self.priority)
        return decide(self.scenario_path, job, self.dcgm_conn_id)


def check_job_args(owner: str, gpus: float, replicas: int, priority: int) -> None:
    """Non-templated job arguments, checked in __init__ (one message naming the argument)."""
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or gpus <= 0 or (gpus > 1 and not float(gpus).is_integer()):
        raise AirflowException(f"{owner}: `gpus` must be > 0 (a fraction below 1, or whole GPUs), got {gpus!r}")
    if not isinstance(replicas, int) or replicas < 1:
        raise AirflowException(f"{owner}: `replicas` must be a whole number >= 1, got {replicas!r}")
    if not isinstance(priority, int):
        raise AirflowException(f"{owner}: `priority` must be a whole number, got {priority!r}")
