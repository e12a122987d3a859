"""Idle, unhealthy, busy and memory headroom, per GPU and per job."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpu_policy.model import Scenario
from gpu_policy.telemetry.model import CRITICAL_XIDS, GpuKey, GpuReading, GpuTelemetry, TelemetrySettings


@dataclass
class GpuSignals:
    status: str  # ok | stale | missing
    idle_for_s: float | None = None  # below the idle threshold since this many seconds (None: not idle)
    idle: bool = False  # below the threshold for the whole window
    busy: bool = False
    critical_xids: list[tuple[int, str]] = field(default_factory=list)
    memory_free_mib: float | None = None
    memory_total_mib: float | None = None
    utilization: float | None = None  # the newest sample

    @property
    def unhealthy(self) -> bool:
        return bool(self.critical_xids)


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


@dataclass
class ClusterSignals:
    """Signals of every GPU seen and of every running job of a scenario."""

    gpus: dict[GpuKey, GpuSignals]
    idle_jobs: dict[str, float]  # job -> seconds idle (every GPU it holds idle all window)
    source: str
    age_s: float | None  # seconds since the newest sample used
    window_s: float

    def unhealthy(self) -> list[GpuKey]:
        return sorted(k for k, g in self.gpus.items() if g.unhealthy)

    def to_dict(self) -> dict:
        """JSON-ready: what a pipeline passes from the telemetry step to the plan step."""
        return {"source": self.source, "age_s": self.age_s, "window_s": self.window_s,
                "idle_jobs": dict(self.idle_jobs),
                "gpus": [{"node": k.node, "gpu": k.gpu, **asdict(g)} for k, g in sorted(self.gpus.items())]}

    @classmethod
    def from_dict(cls, data: dict) -> ClusterSignals:
        gpus = {}
        for g in data["gpus"]:
            fields = {k: v for k, v in g.items() if k not in ("node", "gpu")}
            fields["critical_xids"] = [tuple(x) for x in fields.get("critical_xids", [])]
            gpus[GpuKey(g["node"], g["gpu"])] = GpuSignals(**fields)
        return cls(gpus, dict(data["idle_jobs"]), data["source"], data["age_s"], data["window_s"])

    def describe(self) -> dict:
        """What the Plan records about the telemetry it used."""
        return {
            "source": self.source,
            "window_s": self.window_s,
            "age_s": None if self.age_s is None else round(self.age_s, 1),
            "gpus_seen": sum(1 for g in self.gpus.values() if g.status == "ok"),
            "gpus_stale": sum(1 for g in self.gpus.values() if g.status == "stale"),
            "unhealthy_gpus": [f"{k.node}/{k.gpu}" for k in self.unhealthy()],
            "busy_gpus": [f"{k.node}/{k.gpu}" for k, g in sorted(self.gpus.items()) if g.busy],
            "idle_jobs": {job: round(sec) for job, sec in sorted(self.idle_jobs.items())},
        }


def cluster_signals(telemetry: GpuTelemetry, scenario: Scenario, s: TelemetrySettings) -> ClusterSignals:
    from gpu_policy.planner.layout import running_layout

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
