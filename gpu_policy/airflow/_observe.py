"""Shared by the operators and the sensor: name the cluster, observe it, decide.

The cluster is a scenario file (`scenario_path`, the embedded simulated cluster) or
the live cluster of a cncf-kubernetes connection (`kubernetes_conn_id`, default
``kubernetes_default`` when no scenario is given). The composition itself is
`gpu_policy.actions.cycle`; gpu-policy's own errors become one-line AirflowExceptions.
"""

from __future__ import annotations

import logging
import math
from contextlib import contextmanager

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from gpu_policy import Job
from gpu_policy.airflow.hooks.cluster import GpuClusterHook
from gpu_policy.airflow.hooks.dcgm import DcgmHook
from gpu_policy.cluster import ClusterSource, Observation, ScenarioCluster
from gpu_policy.actions.cycle import observe, wait_for_step
from gpu_policy.errors import GpuPolicyError
from gpu_policy.actions.step import StepDecision
from gpu_policy.telemetry import DcgmSource, TelemetrySettings

log = logging.getLogger(__name__)


@contextmanager
def one_line_errors():
    """gpu-policy's own errors (bad input, an unreachable cluster) as one-line AirflowExceptions."""
    try:
        yield
    except GpuPolicyError as e:
        raise AirflowException(str(e)) from None


def cluster_for(owner: str, scenario_path: str | None, kubernetes_conn_id: str | None) -> ClusterSource:
    """The scenario file, or the connection's live cluster (``kubernetes_default`` when neither is given)."""
    if scenario_path and kubernetes_conn_id:
        raise AirflowException(f"{owner}: give `scenario_path` (the embedded cluster) or `kubernetes_conn_id` "
                               "(a live one), not both")
    if scenario_path:
        return ScenarioCluster(scenario_path)
    with one_line_errors():
        return GpuClusterHook(kubernetes_conn_id or GpuClusterHook.default_conn_name).get_conn()


def telemetry_source(dcgm_conn_id: str | None) -> tuple[DcgmSource | None, TelemetrySettings]:
    """The connection's Prometheus with its settings; None: simulated on the embedded cluster, none on a live one."""
    if dcgm_conn_id:
        source = DcgmHook(dcgm_conn_id).get_conn()
        return source, source.settings
    return None, TelemetrySettings()


def observe_cluster(cluster: ClusterSource, dcgm_conn_id: str | None) -> Observation:
    """One look at the cluster with its telemetry; warnings are also logged."""
    with one_line_errors():
        obs = observe(cluster, *telemetry_source(dcgm_conn_id))
    for warning in obs.warnings:
        log.warning("%s", warning)
    return obs


class StepOperatorBase(BaseOperator):
    """What GpuPlanOperator and GpuPlanSensor share: the step's job and its cluster as arguments,
    and one round of deciding for it. A BaseOperator, so that Airflow wraps this `__init__` (the
    sensor puts BaseSensorOperator after it: its own arguments pass through `kwargs`)."""

    template_fields = ("scenario_path", "kubernetes_conn_id", "job_name", "team", "dcgm_conn_id")

    def __init__(self, *, job_name: str, team: str, gpus: float, scenario_path: str | None = None,
                 kubernetes_conn_id: str | None = None, replicas: int = 1, priority: int = 50,
                 dcgm_conn_id: str | None = None, execute_plan: bool | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        keep_job_args(self, job_name, team, gpus, replicas, priority)
        self.execute_plan = check_execute_plan(type(self).__name__, execute_plan)
        self.scenario_path = scenario_path
        self.kubernetes_conn_id = kubernetes_conn_id
        self.priority = priority
        self.dcgm_conn_id = dcgm_conn_id

    def decide(self) -> StepDecision:
        """One round: observe, decide and, with `execute_plan`, carry the plan out (evictions, the
        step's reservation) under the cluster's planning lease."""
        check_rendered(self)
        cluster = cluster_for(type(self).__name__, self.scenario_path, self.kubernetes_conn_id)
        job = Job(name=self.job_name, queue=self.team, gpus=self.gpus, replicas=self.replicas, priority=self.priority)
        with one_line_errors():
            decision = wait_for_step(cluster, job, None, *telemetry_source(self.dcgm_conn_id),
                                     execute=self.execute_plan)
        for warning in decision.plan.warnings:
            log.warning("%s", warning)
        for outcome in decision.outcomes:
            log.info("%s", outcome.line())
        return decision


def keep_job_args(op, job_name: str, team: str, gpus: float, replicas: int, priority: int) -> None:
    """The step's job on the operator, each argument under its own name (job_name and team are
    templated: `check_rendered` checks them at run time; the others are checked now)."""
    check_job_args(type(op).__name__, gpus, replicas, priority)
    op.job_name = job_name
    op.team = team
    op.gpus = gpus
    op.replicas = replicas


def check_rendered(op) -> None:
    """The job's templated arguments hold their rendered values only at run time: checked then."""
    for name in ("job_name", "team"):
        if not getattr(op, name):
            raise AirflowException(f"{type(op).__name__}: `{name}` is empty")


def check_job_args(owner: str, gpus: float, replicas: int, priority: int) -> None:
    """Non-templated job arguments, checked in __init__ (one message naming the argument)."""
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or gpus <= 0 or (gpus > 1 and not float(gpus).is_integer()):
        raise AirflowException(f"{owner}: `gpus` must be > 0 (a fraction below 1, or whole GPUs), got {gpus!r}")
    if not isinstance(replicas, int) or replicas < 1:
        raise AirflowException(f"{owner}: `replicas` must be a whole number >= 1, got {replicas!r}")
    if not isinstance(priority, int):
        raise AirflowException(f"{owner}: `priority` must be a whole number, got {priority!r}")


def check_seconds(owner: str, positive: dict[str, float], at_least_0: dict[str, float] | None = None) -> None:
    """Non-templated durations, checked in __init__: finite numbers of seconds, above 0
    (`positive`) or at least 0 (`at_least_0`); one message naming the argument."""
    for values, least in ((positive, "> 0"), (at_least_0 or {}, ">= 0")):
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (value == 0 and least == "> 0"):
                raise AirflowException(f"{owner}: `{name}` must be a number of seconds {least}, got {value!r}")


def check_execute_plan(owner: str, execute_plan) -> bool | None:
    """`execute_plan` (not `execute`: that is every operator's method) is true, false or None."""
    if execute_plan not in (None, True, False):
        raise AirflowException(f"{owner}: `execute_plan` must be true, false or None (true on a live cluster, false "
                               f"on the embedded one), got {execute_plan!r}")
    return execute_plan
