"""DcgmHook and a PrometheusConnect: one the DAG's own code built, or one the hook builds from
its connection (login and password as Basic auth, the headers and proxy extras), each reading
the real Prometheus of tests/telemetry/conftest.py."""

import json

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from airflow.exceptions import AirflowException  # noqa: E402
from prometheus_api_client import PrometheusConnect  # noqa: E402

from gpu_policy.airflow.hooks.dcgm import DcgmHook  # noqa: E402
from gpu_policy.telemetry import GpuKey  # noqa: E402
from tests.telemetry.conftest import prometheus_url  # noqa: E402,F401 (a fixture)
from tests.telemetry.own_client import URL_ENV, prometheus_connect  # noqa: E402

GPUS = {GpuKey("node-a", i) for i in range(4)} | {GpuKey("node-b", i) for i in range(2)}


def connection(monkeypatch, name: str, url: str, **fields) -> None:
    host, port = url.rsplit("//", 1)[1].split(":")
    monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", json.dumps(
        {"conn_type": "gpu_policy_dcgm", "host": host, "port": int(port), **fields}))


def test_the_dag_s_own_client_feeds_the_hook(prometheus_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv(URL_ENV, prometheus_url)
    source = DcgmHook(prometheus=prometheus_connect(), window_s=4).get_conn()  # no connection needed
    assert isinstance(source.client, PrometheusConnect) and source.settings.window_s == 4
    assert set(source.collect().gpus) == GPUS


def test_the_hook_builds_a_client_from_its_connection(prometheus_url, monkeypatch):  # noqa: F811
    connection(monkeypatch, "dcgm_client", prometheus_url, login="reader", password="s3cret",
               extra={"client": "prometheus-api-client", "headers": {"X-Scope-OrgID": "ml"}, "window_s": 4})
    hook = DcgmHook("dcgm_client")
    client = hook.get_prometheus_connect()
    assert (client.url, client.auth, client.headers) == (prometheus_url, ("reader", "s3cret"), {"X-Scope-OrgID": "ml"})
    source = hook.get_conn()
    assert isinstance(source.client, PrometheusConnect) and source.settings.window_s == 4
    assert set(source.collect().gpus) == GPUS
    assert "s3cret" not in source.shown_url


def test_the_own_client_sends_the_connection_s_login(prometheus_url, monkeypatch):  # noqa: F811
    connection(monkeypatch, "dcgm_login", prometheus_url, login="reader", password="p@ss")
    source = DcgmHook("dcgm_login").get_conn()
    assert source.client is None and source.url == prometheus_url.replace("//", "//reader:p%40ss@")
    assert source.shown_url == prometheus_url.replace("//", "//reader:***@")
    assert set(source.collect().gpus) == GPUS


def test_extras_the_own_client_cannot_honour_are_refused(monkeypatch):
    connection(monkeypatch, "dcgm_headers", "http://127.0.0.1:9", extra={"headers": {"X": "y"}})
    with pytest.raises(AirflowException, match=r"connection `dcgm_headers`: extras \['headers'\] need "
                                               r'"client": "prometheus-api-client"'):
        DcgmHook("dcgm_headers").get_conn()
    connection(monkeypatch, "dcgm_other", "http://127.0.0.1:9", extra={"client": "requests"})
    with pytest.raises(AirflowException, match=r"extra `client` must be 'prometheus-api-client' or absent"):
        DcgmHook("dcgm_other").get_conn()
