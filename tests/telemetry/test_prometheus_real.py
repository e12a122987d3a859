"""PrometheusDcgmSource against a real Prometheus scraping the simulated exporters, through
both transports: gpu-policy's bounded client (a URL) and a PrometheusConnect of the user's own."""

import pytest
from prometheus_api_client import PrometheusConnect

from gpu_policy import parse_scenario
from gpu_policy.cli import main
from gpu_policy.actions.cycle import plan_with_telemetry
from gpu_policy.telemetry import GpuKey, PrometheusDcgmSource, TelemetrySettings, cluster_signals
from tests.telemetry.conftest import NODE_A, WINDOW_S
from tests.telemetry.own_client import URL_ENV

SETTINGS = TelemetrySettings(window_s=WINDOW_S, history_s=WINDOW_S, step_s=1, stale_after_s=30)


@pytest.fixture(params=["url", "PrometheusConnect"])
def prometheus(request, prometheus_url):
    """What PrometheusDcgmSource is given: the URL, or a PrometheusConnect of it."""
    return prometheus_url if request.param == "url" else PrometheusConnect(url=prometheus_url)


def collect(prometheus):
    return PrometheusDcgmSource(prometheus, SETTINGS).collect()


def test_both_label_spellings(prometheus):
    gpus = collect(prometheus).gpus
    assert {k for k in gpus} == {GpuKey("node-a", i) for i in range(4)} | {GpuKey("node-b", i) for i in range(2)}
    assert gpus[GpuKey("node-b", 0)].pod == "c-job" and gpus[GpuKey("node-a", 0)].namespace == "team-a"


def test_idle_detection(prometheus):
    signals = cluster_signals(collect(prometheus), parse_scenario(NODE_A), SETTINGS)
    assert signals.gpus[GpuKey("node-a", 0)].idle and signals.gpus[GpuKey("node-a", 1)].idle
    assert not signals.gpus[GpuKey("node-a", 2)].idle and signals.gpus[GpuKey("node-a", 2)].busy
    assert set(signals.idle_jobs) == {"idle-job"}
    assert signals.age_s is not None and 0 <= signals.age_s < 5


def test_xid_detection(prometheus):
    signals = cluster_signals(collect(prometheus), parse_scenario(NODE_A), SETTINGS)
    assert signals.gpus[GpuKey("node-a", 3)].critical_xids == [(79, "GPU has fallen off the bus")]
    assert signals.unhealthy() == [GpuKey("node-a", 3)]


def test_sentinel_values_are_dropped(prometheus):
    gpus = collect(prometheus).gpus
    blank, normal = gpus[GpuKey("node-a", 0)], gpus[GpuKey("node-a", 1)]
    assert blank.engine_active is None and blank.power_w is None
    assert normal.engine_active == 0.01 and normal.power_w == 63.0
    assert blank.memory_used_mib == 40960 and blank.memory_free_mib == 40960


def test_planner_takes_the_idle_job_first(prometheus, prometheus_url):
    scenario = parse_scenario(NODE_A)
    result = plan_with_telemetry(scenario, PrometheusDcgmSource(prometheus, SETTINGS), settings=SETTINGS)
    actions = {j.name: j.action for j in result.jobs}
    # without telemetry the newer busy-job would be the victim; idle-job goes first instead
    assert actions == {"idle-job": "preempt", "busy-job": "keep", "b-waits": "start"}
    assert "idle for" in result.job("idle-job").reason
    assert result.telemetry["source"] == f"prometheus {prometheus_url}"
    assert result.telemetry["unhealthy_gpus"] == ["node-a/3"] and result.warnings == []


def test_telemetry_command(prometheus_url, capsys):
    assert main(["telemetry", "--prometheus", prometheus_url, "--window", str(WINDOW_S)]) == 0
    out = capsys.readouterr().out
    assert "XID 79 (GPU has fallen off the bus)" in out and "node-b" in out


def test_telemetry_command_through_the_user_s_own_client(prometheus_url, monkeypatch, capsys):
    """`--prometheus-client module:function`: the PrometheusConnect the user's code builds."""
    monkeypatch.setenv(URL_ENV, prometheus_url)
    assert main(["telemetry", "--prometheus-client", "tests.telemetry.own_client:prometheus_connect",
                 "--window", str(WINDOW_S)]) == 0
    out = capsys.readouterr().out
    assert "XID 79 (GPU has fallen off the bus)" in out and "node-b" in out


def test_the_client_option_is_one_line_when_wrong(prometheus_url, capsys):
    assert main(["telemetry", "--prometheus-client", "nope"]) == 2
    assert "gpu-policy: --prometheus-client: must be 'module:function', got 'nope'" in capsys.readouterr().err
    assert main(["telemetry", "--prometheus-client", "tests.telemetry.conftest:free_port"]) == 2
    assert "prometheus: must be a URL or a prometheus_api_client.PrometheusConnect, got int" in \
           capsys.readouterr().err
    assert main(["telemetry", "--prometheus", prometheus_url, "--prometheus-client", "m:f"]) == 2
    assert "give --prometheus URL or --prometheus-client, not both" in capsys.readouterr().err
