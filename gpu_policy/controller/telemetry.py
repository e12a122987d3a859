"""DCGM telemetry for the controller's plans (docs/telemetry.md), read without holding a round.

A thread of its own collects readings every `every_s`, so a slow or unreachable Prometheus
never delays a plan or the Lease's renewal; each round judges the newest readings against
its own scenario (`judge`), as `apply --prometheus` judges its one collection. With
telemetry the plan sees idle jobs and GPUs: idle attached GPUs are detached
(docs/composition.md). Monitoring that is down is a warning on the plan, never an error.
"""

from __future__ import annotations

import logging
import threading

from gpu_policy.model import Scenario
from gpu_policy.telemetry import ClusterSignals, DcgmSource, GpuTelemetry, TelemetrySettings, TelemetryUnavailable
from gpu_policy.telemetry import cluster_signals

log = logging.getLogger(__name__)
#: how often readings are collected: a dcgm-exporter scrape interval or two
EVERY_S = 30.0


class TelemetryFeed:
    def __init__(self, source: DcgmSource, settings: TelemetrySettings | None = None, every_s: float = EVERY_S):
        self.source, self.settings, self.every_s = source, settings or TelemetrySettings(), every_s
        self.readings: GpuTelemetry | None = None
        self.problem: str | None = "planned without telemetry: none collected yet"
        self.collected = threading.Event()  # set after each collection (tests wait on it)

    def start(self, stop: threading.Event) -> None:
        """Collect now and every `every_s` until `stop` is set."""
        def loop() -> None:
            while not stop.is_set():
                self.collect()
                stop.wait(self.every_s)

        threading.Thread(target=loop, name="telemetry", daemon=True).start()

    def collect(self) -> None:
        try:
            readings, problem = self.source.collect(self.settings), None
        except TelemetryUnavailable as e:
            readings, problem = None, f"planned without telemetry: {e}"
        if problem and problem != self.problem:
            log.warning("%s", problem)
        self.readings, self.problem = readings, problem
        self.collected.set()

    def judge(self, scenario: Scenario) -> tuple[ClusterSignals | None, str | None]:
        """The signals of the newest readings for this scenario, or (None, why there are none)."""
        readings = self.readings
        if readings is None:
            return None, self.problem
        return cluster_signals(readings, scenario, self.settings), None
