"""GpuTelemetryOperator: the cluster's DCGM signals, as an XCom."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from gpu_policy.airflow._observe import cluster_for, observe_cluster

__all__ = ["GpuTelemetryOperator"]


class GpuTelemetryOperator(BaseOperator):
    """Collect DCGM telemetry (Prometheus through ``dcgm_conn_id``; without one, simulated
    on the embedded cluster of ``scenario_path`` and unavailable on a live one) and return
    the per-GPU and per-job signals of the cluster (``kubernetes_conn_id`` or
    ``scenario_path``, as GpuPlanOperator). Monitoring that is down is a warning in the
    result, never a failed task."""

    template_fields: Sequence[str] = ("scenario_path", "kubernetes_conn_id", "dcgm_conn_id")

    def __init__(self, *, scenario_path: str | None = None, kubernetes_conn_id: str | None = None,
                 dcgm_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario_path = scenario_path
        self.kubernetes_conn_id = kubernetes_conn_id
        self.dcgm_conn_id = dcgm_conn_id

    def execute(self, context) -> dict:
        obs = observe_cluster(cluster_for(type(self).__name__, self.scenario_path, self.kubernetes_conn_id),
                              self.dcgm_conn_id)
        if obs.signals is None:
            return {"unavailable": obs.telemetry_unavailable or "no DCGM connection given for a live cluster"}
        self.log.info("telemetry: %s", obs.signals.describe())
        return obs.signals.to_dict()
