"""DCGM telemetry: what the GPUs are really doing (docs/telemetry.md).

`dcgm_source(url, scenario)` picks the backend from the URL, as fsspec does:
none means the embedded simulated source, ``http://`` or ``https://`` a
Prometheus server that scrapes dcgm-exporter. Planning with telemetry is
`gpu_policy.actions.cycle` (observe -> decide).
"""

from __future__ import annotations

from typing import Protocol

from gpu_policy.errors import UsageError
from gpu_policy.model import Scenario
from gpu_policy.telemetry.http import redact_url
from gpu_policy.model.telemetry import CRITICAL_XIDS, GpuKey, GpuReading, GpuTelemetry, TelemetrySettings
from gpu_policy.telemetry.prometheus import PrometheusDcgmSource, TelemetryUnavailable
from gpu_policy.model.signals import ClusterSignals, GpuSignals
from gpu_policy.telemetry.signals import cluster_signals
from gpu_policy.telemetry.simulated import SimulatedDcgmSource


class DcgmSource(Protocol):
    """What the planner needs from a telemetry backend."""

    def collect(self, settings: TelemetrySettings | None = None) -> GpuTelemetry: ...


def dcgm_source(url: str | None, scenario: Scenario, settings: TelemetrySettings | None = None) -> DcgmSource:
    if not url or url == "simulated":
        return SimulatedDcgmSource(scenario)
    if url.startswith(("http://", "https://")):
        return PrometheusDcgmSource(url, settings)
    raise UsageError(f"telemetry: must be 'simulated' or a Prometheus http(s):// URL, got {redact_url(url)!r}")


def observe(scenario: Scenario, source: DcgmSource | None = None,
            settings: TelemetrySettings | None = None) -> tuple[ClusterSignals | None, str | None]:
    """Collect telemetry (simulated when `source` is None) and judge it.

    When monitoring fails (unreachable, slow, 5xx, malformed data) the result is
    ``(None, warning)``, never an error: a pipeline step never fails because
    monitoring is down.
    """
    settings = settings or TelemetrySettings()
    source = source or SimulatedDcgmSource(scenario)
    try:
        return cluster_signals(source.collect(settings), scenario, settings), None
    except TelemetryUnavailable as e:
        return None, f"planned without telemetry: {e}"


__all__ = [
    "CRITICAL_XIDS", "ClusterSignals", "DcgmSource", "GpuKey", "GpuReading", "GpuSignals", "GpuTelemetry",
    "PrometheusDcgmSource", "SimulatedDcgmSource", "TelemetrySettings", "TelemetryUnavailable", "cluster_signals",
    "dcgm_source", "observe",
]
