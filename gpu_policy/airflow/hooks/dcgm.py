"""DcgmHook: DCGM telemetry from the Prometheus named by an Airflow connection, or through a
`PrometheusConnect` (prometheus-api-client) of the DAG's own or built from the connection."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.exceptions import AirflowException
from airflow.sdk import BaseHook

from gpu_policy.errors import install_hint
from gpu_policy.telemetry import PrometheusDcgmSource, TelemetrySettings

__all__ = ["DcgmHook"]

_EXTRAS = ("window_s", "timeout_s", "retries", "backoff_s", "idle_below_pct", "busy_above_pct")
#: the connection's extras that only a PrometheusConnect can honour
_CLIENT_EXTRAS = ("headers", "proxy")
CLIENT = "prometheus-api-client"


class DcgmHook(BaseHook):
    """Connection type ``gpu_policy_dcgm``: host, port and schema of Prometheus (http or
    https), login and password for HTTP Basic auth; extras may set window_s, timeout_s,
    retries, backoff_s, idle_below_pct and busy_above_pct. Arguments given to the hook win over
    the extras. The queries run through gpu-policy's bounded client, unless the hook is given
    a ``prometheus`` (a PrometheusConnect your code built) or the connection's extra says
    ``"client": "prometheus-api-client"`` (then ``headers`` and ``proxy`` extras are passed
    to the PrometheusConnect it builds)."""

    conn_name_attr = "dcgm_conn_id"
    default_conn_name = "dcgm_default"
    conn_type = "gpu_policy_dcgm"
    hook_name = "GPU telemetry (DCGM through Prometheus)"

    def __init__(self, dcgm_conn_id: str = default_conn_name, prometheus: Any = None, **overrides: Any) -> None:
        super().__init__()
        unknown = sorted(set(overrides) - set(_EXTRAS))
        if unknown:
            raise AirflowException(f"DcgmHook: unknown settings {unknown}; allowed: {', '.join(_EXTRAS)}")
        self.dcgm_conn_id = dcgm_conn_id
        self.prometheus = prometheus
        self.overrides = overrides

    def settings(self, extras: dict) -> TelemetrySettings:
        values = {k: extras[k] for k in _EXTRAS if k in extras}
        values.update({k: v for k, v in self.overrides.items() if v is not None})
        try:
            return TelemetrySettings(**{k: (int(v) if k == "retries" else float(v)) for k, v in values.items()})
        except (TypeError, ValueError) as e:
            raise AirflowException(f"connection `{self.dcgm_conn_id}`: bad telemetry setting: {e}") from e

    def get_conn(self) -> PrometheusDcgmSource:
        """The telemetry source: through the hook's `prometheus` (the settings then come from the
        hook's arguments alone: no connection is read), or the connection's."""
        if self.prometheus is not None:
            return PrometheusDcgmSource(self.prometheus, self.settings({}))
        conn = self.get_connection(self.dcgm_conn_id)
        extras = conn.extra_dejson or {}
        client = extras.get("client")
        if client not in (None, CLIENT):
            raise AirflowException(f"connection `{self.dcgm_conn_id}`: extra `client` must be {CLIENT!r} or absent "
                                   f"(gpu-policy's own bounded client), got {client!r}")
        for_client = sorted(k for k in _CLIENT_EXTRAS if k in extras)
        if for_client and client != CLIENT:
            raise AirflowException(f"connection `{self.dcgm_conn_id}`: extras {for_client} need "
                                   f'"client": "{CLIENT}" (gpu-policy\'s own client sends neither)')
        prometheus = self.get_prometheus_connect() if client == CLIENT else self._url(conn, with_login=True)
        return PrometheusDcgmSource(prometheus, self.settings(extras))

    def get_prometheus_connect(self):
        """A PrometheusConnect built from the connection: its URL, login and password as Basic
        auth, and the `headers` and `proxy` extras (needs the `[prometheus]` extra)."""
        try:
            from prometheus_api_client import PrometheusConnect
        except ImportError:
            raise AirflowException("DcgmHook: a PrometheusConnect needs prometheus-api-client: "
                                   + install_hint("prometheus")) from None
        conn = self.get_connection(self.dcgm_conn_id)
        extras = conn.extra_dejson or {}
        auth = (conn.login, conn.password or "") if conn.login else None
        return PrometheusConnect(url=self._url(conn, with_login=False), headers=extras.get("headers"), auth=auth,
                                 proxy=extras.get("proxy"))

    def _url(self, conn, with_login: bool) -> str:
        if not conn.host:
            raise AirflowException(f"connection `{self.dcgm_conn_id}` has no host: set it to the Prometheus server")
        scheme = conn.schema or "http"
        if scheme not in ("http", "https"):
            raise AirflowException(f"connection `{self.dcgm_conn_id}`: schema must be http or https, got {scheme!r}")
        login = f"{quote(conn.login, safe='')}:{quote(conn.password or '', safe='')}@" if with_login and conn.login else ""
        return f"{scheme}://{login}{conn.host}:{conn.port or 9090}"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": [],
            "relabeling": {"host": "Prometheus host", "schema": "Scheme (http or https)",
                           "login": "User (HTTP Basic auth, optional)", "password": "Password (optional)"},
            "placeholders": {"host": "prometheus.monitoring", "port": "9090", "schema": "http",
                             "extra": '{"window_s": 600, "timeout_s": 5, "retries": 2}'},
        }
