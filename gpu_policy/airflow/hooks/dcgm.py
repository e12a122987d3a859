"""DcgmHook: DCGM telemetry from the Prometheus named by an Airflow connection."""

from __future__ import annotations

from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseHook

from gpu_policy.telemetry import PrometheusDcgmSource, TelemetrySettings

__all__ = ["DcgmHook"]

_EXTRAS = ("window_s", "timeout_s", "retries", "backoff_s", "idle_below_pct", "busy_above_pct")


class DcgmHook(BaseHook):
    """Connection type ``gpu_policy_dcgm``: host, port and schema of Prometheus (http or
    https); extras may set window_s, timeout_s, retries, backoff_s, idle_below_pct and
    busy_above_pct. Arguments given to the hook win over the extras."""

    conn_name_attr = "dcgm_conn_id"
    default_conn_name = "dcgm_default"
    conn_type = "gpu_policy_dcgm"
    hook_name = "GPU telemetry (DCGM through Prometheus)"

    def __init__(self, dcgm_conn_id: str = default_conn_name, **overrides: Any) -> None:
        super().__init__()
        unknown = sorted(set(overrides) - set(_EXTRAS))
        if unknown:
            raise AirflowException(f"DcgmHook: unknown settings {unknown}; allowed: {', '.join(_EXTRAS)}")
        self.dcgm_conn_id = dcgm_conn_id
        self.overrides = overrides

    def settings(self, extras: dict) -> TelemetrySettings:
        values = {k: extras[k] for k in _EXTRAS if k in extras}
        values.update({k: v for k, v in self.overrides.items() if v is not None})
        try:
            return TelemetrySettings(**{k: (int(v) if k == "retries" else float(v)) for k, v in values.items()})
        except (TypeError, ValueError) as e:
            raise AirflowException(f"connection `{self.dcgm_conn_id}`: bad telemetry setting: {e}") from e

    def get_conn(self) -> PrometheusDcgmSource:
        conn = self.get_connection(self.dcgm_conn_id)
        if not conn.host:
            raise AirflowException(f"connection `{self.dcgm_conn_id}` has no host: set it to the Prometheus server")
        scheme = conn.schema or "http"
        if scheme not in ("http", "https"):
            raise AirflowException(f"connection `{self.dcgm_conn_id}`: schema must be http or https, got {scheme!r}")
        url = f"{scheme}://{conn.host}:{conn.port or 9090}"
        return PrometheusDcgmSource(url, self.settings(conn.extra_dejson or {}))

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["login", "password"],
            "relabeling": {"host": "Prometheus host", "schema": "Scheme (http or https)"},
            "placeholders": {"host": "prometheus.monitoring", "port": "9090", "schema": "http",
                             "extra": '{"window_s": 600, "timeout_s": 5, "retries": 2}'},
        }
