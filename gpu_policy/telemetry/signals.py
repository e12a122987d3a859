"""Idle, unhealthy, busy and memory headroom, per GPU and per job."""

from __future__ import annotations

from gpu_policy.model import Scenario
from gpu_policy.model.layout import running_layout
from gpu_policy.model.signals import ClusterSignals, GpuSignals
from gpu_policy.model.telemetry import CRITICAL_XIDS, GpuKey, GpuReading, GpuTelemetry, TelemetrySettings


def gpu_signals(reading: GpuReading | None, telemetry: GpuTelemetry, s: TelemetrySettings) -> GpuSignals:
    if reading is None:
        return GpuSignals(status="missing")
    # a critical XID in the window counts even from a GPU that stopped reporting (XID 79 does)
    xids = sorted({(code, CRITICAL_XIDS[code]) for t, code, _ in reading.xids
                   if code in CRITICAL_XIDS and t >= telemetry.collected_at - s.window_s})
    if reading.last_seen is None or telemetry.collected_at - reading.last_seen > s.stale_after_s:
        return GpuSignals(status="stale", critical_xids=xids)
    samples = sorted(reading.utilization)
    now_util = samples[-1][1] if samples else None
    idle_for = None
    for t, value in reversed(samples):
        if value >= s.idle_below_pct:
            break
        idle_for = telemetry.collected_at - t
    start = telemetry.collected_at - s.window_s
    covered = bool(samples) and samples[0][0] <= start + 1.5 * s.step()
    total = None
    if reading.memory_used_mib is not None and reading.memory_free_mib is not None:
        total = reading.memory_used_mib + reading.memory_free_mib
    return GpuSignals(
        status="ok",
        idle_for_s=idle_for,
        idle=covered and idle_for is not None and all(v < s.idle_below_pct for t, v in samples if t >= start),
        busy=now_util is not None and now_util > s.busy_above_pct,
        critical_xids=xids,
        memory_free_mib=reading.memory_free_mib,
        memory_total_mib=total,
        utilization=now_util,
    )


def cluster_signals(telemetry: GpuTelemetry, scenario: Scenario, s: TelemetrySettings) -> ClusterSignals:
    layout = running_layout(scenario)
    keys = set(telemetry.gpus) | {GpuKey(n.name, i) for n in scenario.nodes for i in range(n.gpus)}
    gpus = {k: gpu_signals(telemetry.gpus.get(k), telemetry, s) for k in keys}
    idle_jobs = {}
    for job in scenario.jobs:
        if not job.is_running:
            continue
        held = [gpus[GpuKey(node, i)] for node, ix in zip(job.running, layout.indices[job.name]) for i in ix]
        if held and all(g.idle for g in held):
            idle_jobs[job.name] = min(g.idle_for_s for g in held)
    seen = [r.last_seen for r in telemetry.gpus.values() if r.last_seen is not None]
    age = telemetry.collected_at - max(seen) if seen else None
    return ClusterSignals(gpus, idle_jobs, telemetry.source, age, telemetry.window_s)
