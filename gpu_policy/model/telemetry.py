"""What DCGM telemetry the planner reads, and the settings that judge it (docs/telemetry.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# dcgm-exporter series read by gpu-policy
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # %, 0-100
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # 0-1, profiling metrics (not on every GPU)
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"  # value = the last XID; labels err_code, err_msg
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
TEMPERATURE = "DCGM_FI_DEV_GPU_TEMP"  # C
INSTANT_SERIES = (FB_USED, FB_FREE, ENGINE_ACTIVE, POWER, TEMPERATURE)

#: DCGM marks "blank", "not found", "not supported" and "no permission" with values at
#: or above DCGM_INT32_BLANK (0x7ffffff0); the int64 and fp64 blanks (0x7ffffffffffffff0,
#: 2**47) are larger still. No series read here can reach it honestly.
DCGM_BLANK = 0x7FFFFFF0

#: XIDs that mean the GPU itself is failing, not that a job crashed (NVIDIA's XID catalogue):
CRITICAL_XIDS = {
    48: "double-bit ECC error",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def is_blank(value: float) -> bool:
    """True for DCGM's sentinel values and for NaN or infinite ones: "no reading", not a number."""
    return not math.isfinite(value) or value >= DCGM_BLANK


@dataclass(frozen=True, order=True)
class GpuKey:
    node: str
    gpu: int


@dataclass
class GpuReading:
    """One GPU's telemetry over the window; None where the series is missing or blank."""

    utilization: list[tuple[float, float]] = field(default_factory=list)  # (unix time, %) over the window
    memory_used_mib: float | None = None
    memory_free_mib: float | None = None
    engine_active: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    xids: list[tuple[float, int, str]] = field(default_factory=list)  # (time, XID, message) in the window
    last_seen: float | None = None  # time of the newest utilisation sample
    model: str | None = None
    uuid: str | None = None
    pod: str | None = None
    namespace: str | None = None


@dataclass
class GpuTelemetry:
    """Every GPU's reading, when and from where they were collected."""

    source: str
    collected_at: float
    window_s: float
    gpus: dict[GpuKey, GpuReading]


@dataclass
class TelemetrySettings:
    window_s: float = 600.0
    """Seconds of history judged (10 minutes: long enough that a data-loader stall or a
    checkpoint does not look idle)."""

    idle_below_pct: float = 5.0
    """An allocated GPU below this utilisation for the whole window is idle."""

    busy_above_pct: float = 70.0
    """Above this utilisation a GPU takes no new fractional job: co-located jobs
    interfere once utilisation passes about 70%."""

    history_s: float = 3600.0
    """How far back an idle GPU's idle time is traced (the plan says "idle for 25 min");
    at least the window."""

    stale_after_s: float = 120.0
    """A GPU whose newest sample is older than this has no signals (stale)."""

    step_s: float | None = None
    """Resolution of range queries; None: the span (window or history) / 240, at least
    1 s: 15 s by default, and far below Prometheus's 11,000 points per series."""

    timeout_s: float = 5.0
    """Seconds one Prometheus request may take in all, from connecting to the last byte
    (a deadline, not a per-read timeout: a server that trickles bytes is cut off)."""

    total_timeout_s: float = 30.0
    """Seconds all the queries of one collection may take, retries included: a plan
    waits at most this long for monitoring before it goes on without it."""

    max_answer_bytes: int = 64 * 1024 * 1024
    """Largest Prometheus answer read (64 MiB: 10,000 GPUs x 240 samples is about 30 MiB)."""

    verify_tls: bool = True
    """Verify an https:// Prometheus's certificate and host name. Turning it off
    (``--prometheus-insecure``) lets anyone on the path forge telemetry."""

    retries: int = 2
    """Further attempts after a failed request (so 3 in all by default)."""

    backoff_s: float = 0.5
    """Wait before the first retry; doubled before each further one."""

    @property
    def span_s(self) -> float:
        """Seconds of history read: the window, or the idle history when longer."""
        return max(self.window_s, self.history_s)

    def step(self) -> float:
        return self.step_s if self.step_s else max(1.0, self.span_s / 240.0)
