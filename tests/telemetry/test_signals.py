"""Signals from readings: idle, busy, unhealthy, stale and missing data, explicitly."""

from gpu_policy import parse_scenario
from gpu_policy.telemetry import GpuKey, GpuReading, GpuTelemetry, TelemetrySettings, cluster_signals
from gpu_policy.telemetry.exporter import render_metrics
from gpu_policy.model.telemetry import is_blank
from gpu_policy.telemetry.signals import gpu_signals
from gpu_policy.telemetry.simulated import SimulatedDcgmSource
from tests.telemetry.conftest import NODE_A

NOW = 10_000.0
S = TelemetrySettings(window_s=600, history_s=600, step_s=60, stale_after_s=120)


def telemetry(reading):
    return GpuTelemetry("test", NOW, 600, {GpuKey("n", 0): reading})


def series(values, step=60):
    return [(NOW - step * (len(values) - 1 - k), v) for k, v in enumerate(values)]


def test_idle_needs_the_whole_window():
    idle = GpuReading(utilization=series([1] * 11), last_seen=NOW)
    short = GpuReading(utilization=series([1] * 5), last_seen=NOW)  # only 4 minutes of history
    spike = GpuReading(utilization=series([1] * 5 + [40] + [1] * 5), last_seen=NOW)
    assert gpu_signals(idle, telemetry(idle), S).idle
    assert not gpu_signals(short, telemetry(short), S).idle
    s = gpu_signals(spike, telemetry(spike), S)
    assert not s.idle and s.idle_for_s == 240


def test_busy_above_threshold():
    hot = GpuReading(utilization=series([75]), last_seen=NOW)
    assert gpu_signals(hot, telemetry(hot), S).busy


def test_stale_and_missing_are_explicit():
    old = GpuReading(utilization=series([1] * 11), last_seen=NOW - 300)
    stale = gpu_signals(old, telemetry(old), S)
    assert stale.status == "stale" and not stale.idle and not stale.busy
    assert gpu_signals(None, telemetry(old), S).status == "missing"


def test_only_critical_xids_in_the_window_count():
    reading = GpuReading(utilization=series([50]), last_seen=NOW,
                         xids=[(NOW - 30, 13, "graphics engine exception"), (NOW - 7200, 79, "old")])
    assert not gpu_signals(reading, telemetry(reading), S).unhealthy
    reading.xids.append((NOW - 30, 48, "DBE"))
    assert gpu_signals(reading, telemetry(reading), S).critical_xids == [(48, "double-bit ECC error")]


def test_xid_from_a_gpu_that_stopped_reporting():
    gone = GpuReading(last_seen=NOW - 400, xids=[(NOW - 500, 79, "fell off the bus")])
    s = gpu_signals(gone, telemetry(gone), S)
    assert s.status == "stale" and s.unhealthy


def test_sentinels():
    assert is_blank(2147483632) and is_blank(2.0 ** 47) and is_blank(9.223372036854776e18)
    assert not is_blank(100) and not is_blank(81920)


def test_exporter_text_format_and_blanks():
    """dcgm-exporter's families (gauges), labels and DCGM's blanks, as a Prometheus parser reads them."""
    from prometheus_client.parser import text_string_to_metric_families

    text = render_metrics(parse_scenario(NODE_A), hostname_label="hostname")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_POWER_USAGE",
                             "DCGM_FI_DEV_GPU_TEMP"}
    assert {f.type for f in families.values()} == {"gauge"}
    by_gpu = {(f.name, s.labels["gpu"]): s for f in families.values() for s in f.samples}
    assert by_gpu["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0"].value == 2.0 ** 47  # unsupported: DCGM's FP64 blank
    idle = by_gpu["DCGM_FI_DEV_GPU_UTIL", "0"].labels
    assert idle == {"gpu": "0", "UUID": idle["UUID"], "device": "nvidia0", "modelName": idle["modelName"],
                    "pci_bus_id": "00000000:10:00.0", "hostname": "node-a", "namespace": "team-a",
                    "pod": "idle-job", "container": "main"}
    xid = by_gpu["DCGM_FI_DEV_XID_ERRORS", "3"]
    assert xid.value == 79 and xid.labels["err_code"] == "79" and xid.labels["err_msg"] == "simulated"


def test_simulated_source_agrees_with_its_profile():
    s = parse_scenario(NODE_A)
    signals = cluster_signals(SimulatedDcgmSource(s, clock=lambda: NOW).collect(S), s, S)
    assert signals.idle_jobs == {"idle-job": 600} and signals.unhealthy() == [GpuKey("node-a", 3)]
    assert signals.gpus[GpuKey("node-a", 2)].busy
