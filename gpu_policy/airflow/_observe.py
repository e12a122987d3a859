"""Shared by the operators and the sensor: name the cluster, observe it, decide.

The cluster is a scenario file (`scenario_path`, the embedded simulated cluster) or
the live cluster of a cncf-kubernetes connection (`kubernetes_conn_id`, default
``kubernetes_default`` when no scenario is given). The composition itself is
`gpu_policy.actions.cycle`; gpu-policy's own errors become one-line AirflowExceptions.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from airflow.exceptions import AirflowException

from gpu_policy import Job
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
    from gpu_policy.airflow.hooks.cluster import GpuClusterHook

    with one_line_errors():
        return GpuClusterHook(kubernetes_conn_id or GpuClusterHook.default_conn_name).get_conn()


def telemetry_source(dcgm_conn_id: str | None) -> tuple[DcgmSource | None, TelemetrySettings]:
    """The connection's Prometheus with its settings; None: simulated on the embedded cluster, none on a live one."""
    if dcgm_conn_id:
        from gpu_policy.airflow.hooks.dcgm import DcgmHook

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


class StepJobArgs:
    """The step's job and its cluster, as GpuPlanOperator and GpuPlanSensor take them."""

    template_fields = ("scenario_path", "kubernetes_conn_id", "job_name", "team", "dcgm_conn_id")

    def set_job_args(self, scenario_path: str | None, kubernetes_conn_id: str | None, job_name: str, team: str,
                     gpus: float, replicas: int, priority: int, dcgm_conn_id: str | None,
                     execute_plan: bool | None) -> None:
        check_job_args(type(self).__name__, gpus, replicas, priority)
        self.execute_plan = check_execute_plan(type(self).__name__, execute_plan)
        self.scenario_path = scenario_path
        self.kubernetes_conn_id = kubernetes_conn_id
        self.job_name = job_name
        self.team = team
        self.gpus = gpus
        self.replicas = replicas
        self.priority = priority
        self.dcgm_conn_id = dcgm_conn_id

    def decide(self) -> StepDecision:
        """One round: observe, decide and, with `execute_plan`, carry the plan out (evictions, the
        step's reservation) under the cluster's planning lease."""
        # templated fields hold their rendered values only now, so they are checked here
        owner = type(self).__name__
        for name in ("job_name", "team"):
            if not getattr(self, name):
                raise AirflowException(f"{owner}: `{name}` is empty")
        cluster = cluster_for(owner, self.scenario_path, self.kubernetes_conn_id)
        job = Job(name=self.job_name, queue=self.team, gpus=self.gpus, replicas=self.replicas, priority=self.priority)
        with one_line_errors():
            decision = wait_for_step(cluster, job, None, *telemetry_source(self.dcgm_conn_id),
                                     execute=self.execute_plan)
        for warning in decision.plan.warnings:
            log.warning("%s", warning)
        for outcome in decision.outcomes:
            log.info("%s", outcome.line())
        return decision


def check_job_args(owner: str, gpus: float, replicas: int, priority: int) -> None:
    """Non-templated job arguments, checked in __init__ (one message naming the argument)."""
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or gpus <= 0 or (gpus > 1 and not float(gpus).is_integer()):
        raise AirflowException(f"{owner}: `gpus` must be > 0 (a fraction below 1, or whole GPUs), got {gpus!r}")
    if not isinstance(replicas, int) or replicas < 1:
        raise AirflowException(f"{owner}: `replicas` must be a whole number >= 1, got {replicas!r}")
    if not isinstance(priority, int):
        raise AirflowException(f"{owner}: `priority` must be a whole number, got {priority!r}")


def check_execute_plan(owner: str, execute_plan) -> bool | None:
    """`execute_plan` (not `execute`: that is every operator's method) is true, false or None."""
    if execute_plan not in (None, True, False):
        raise AirflowException(f"{owner}: `execute_plan` must be true, false or None (true on a live cluster, false "
                               f"on the embedded one), got {execute_plan!r}")
    return execute_plan
