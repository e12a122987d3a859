"""GpuTelemetryOperator: the cluster's DCGM signals, as an XCom."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from gpu_policy.airflow._observe import load, signals_for

__all__ = ["GpuTelemetryOperator"]


class GpuTelemetryOperator(BaseOperator):
    """Collect DCGM telemetry (Prometheus through ``dcgm_conn_id``, or simulated from the
    scenario when it is None) and return the per-GPU and per-job signals. Monitoring
    that is down is a warning in the result, never a failed task."""

    template_fields: Sequence[str] = ("scenario_path", "dcgm_conn_id")

    def __init__(self, *, scenario_path: str, dcgm_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario_path = scenario_path
        self.dcgm_conn_id = dcgm_conn_id

    def execute(self, context) -> dict:
        if not self.scenario_path:
            raise AirflowException("GpuTelemetryOperator: `scenario_path` is empty; give a scenario file")
        signals, warning = signals_for(load(self.scenario_path), self.dcgm_conn_id)
        if signals is None:
            return {"unavailable": warning}
        self.log.info("telemetry: %s", signals.describe())
        return signals.to_dict()
