"""Simulated DCGM telemetry from a scenario's optional ``telemetry:`` section.

Each GPU's state comes from the job that holds it: its utilisation profile
(``utilization`` for the last ``for_s`` seconds, ``before`` earlier), its
framebuffer use, and per-GPU faults (an XID, series the GPU does not support).
`SimulatedDcgmSource` (the embedded default) and the simulated dcgm-exporter
both read GPUs through `simulated_gpus`, so they always agree.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from gpu_policy.model import Scenario
from gpu_policy.model.layout import running_layout
from gpu_policy.model.telemetry import (
    ENGINE_ACTIVE, GpuKey, GpuReading, GpuTelemetry, POWER, TEMPERATURE, TelemetrySettings)

DEFAULT_MEMORY_MIB = 81920
DEFAULT_UTILIZATION = 60.0  # a running job with no profile is busy enough to leave alone


@dataclass
class SimulatedGpu:
    key: GpuKey
    model: str
    utilization: float
    before: float
    for_s: float | None  # None: at this level for ever
    memory_used_mib: float
    memory_total_mib: float
    xid: int | None = None
    xid_ago_s: float = 60.0
    unsupported: set[str] = field(default_factory=set)
    pod: str | None = None
    namespace: str | None = None

    @property
    def uuid(self) -> str:
        digest = hashlib.sha1(f"{self.key.node}/{self.key.gpu}".encode()).hexdigest()
        return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    def utilization_at(self, seconds_ago: float) -> float:
        return self.utilization if self.for_s is None or seconds_ago <= self.for_s else self.before


def simulated_gpus(s: Scenario) -> dict[GpuKey, SimulatedGpu]:
    section = s.telemetry or {}
    memory = float(section.get("memory_mib", DEFAULT_MEMORY_MIB))
    profiles = section.get("jobs", {})
    layout = running_layout(s)
    gpus: dict[GpuKey, SimulatedGpu] = {}
    for node in s.nodes:
        for i, slot in enumerate(layout.nodes[node.name].slots):
            holders = [(slot.whole, 1.0)] if slot.whole else list(slot.fractions)
            used, util, before, for_s, pod, namespace = 0.0, 0.0, 0.0, None, None, None
            for name, share in holders:
                p = profiles.get(name, {})
                job = next(j for j in s.jobs if j.name == name)
                used += p.get("memory_used_mib", 0.5 * memory * share)
                util = max(util, p.get("utilization", DEFAULT_UTILIZATION))
                before = max(before, p.get("before", DEFAULT_UTILIZATION))
                if "for_s" in p:
                    for_s = p["for_s"] if for_s is None else min(for_s, p["for_s"])
                pod, namespace = pod or name, namespace or job.queue
            gpus[GpuKey(node.name, i)] = SimulatedGpu(
                GpuKey(node.name, i), node.gpu_model or "NVIDIA A100-SXM4-80GB", util, before, for_s,
                min(used, memory), memory, pod=pod, namespace=namespace)
    for fault in section.get("gpus", []):
        gpu = gpus[GpuKey(fault["node"], fault["gpu"])]
        gpu.xid = fault.get("xid", gpu.xid)
        gpu.xid_ago_s = fault.get("xid_ago_s", gpu.xid_ago_s)
        gpu.utilization = fault.get("utilization", gpu.utilization)
        gpu.memory_used_mib = fault.get("memory_used_mib", gpu.memory_used_mib)
        gpu.unsupported |= set(fault.get("unsupported", []))
    return gpus


class SimulatedDcgmSource:
    """The embedded telemetry source: what dcgm-exporter would report for the scenario."""

    def __init__(self, scenario: Scenario, clock=time.time):
        self.scenario = scenario
        self.clock = clock

    def collect(self, settings: TelemetrySettings | None = None) -> GpuTelemetry:
        s = settings or TelemetrySettings()
        now, step = self.clock(), s.step()
        points = int(s.span_s // step)
        gpus = {}
        for key, g in simulated_gpus(self.scenario).items():
            gpus[key] = GpuReading(
                utilization=[(now - k * step, g.utilization_at(k * step)) for k in range(points, -1, -1)],
                memory_used_mib=g.memory_used_mib,
                memory_free_mib=g.memory_total_mib - g.memory_used_mib,
                engine_active=None if ENGINE_ACTIVE in g.unsupported else g.utilization / 100,
                power_w=None if POWER in g.unsupported else 60 + 3 * g.utilization,
                temperature_c=None if TEMPERATURE in g.unsupported else 35 + g.utilization / 3,
                xids=[(now - g.xid_ago_s, g.xid, "simulated")] if g.xid else [],
                last_seen=now, model=g.model, uuid=g.uuid, pod=g.pod, namespace=g.namespace,
            )
        return GpuTelemetry(source="simulated", collected_at=now, window_s=s.window_s, gpus=gpus)
