"""What telemetry says of each GPU and each running job once judged (`gpu_policy.telemetry.signals`
judges it): idle, unhealthy, busy, memory headroom. The planner reads these; a pipeline passes
them from the telemetry step to the plan step as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpu_policy.model.telemetry import GpuKey


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
