"""What a cluster source gives the planner: one `Observation` per look."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gpu_policy.model import Job, Scenario


@dataclass
class Observation:
    """One look at a cluster: its snapshot as a scenario, what the look cost (a live
    cluster's `observed`: source, api_calls, objects, bytes, seconds; None for the embedded
    one), what a person should know, and the GPU telemetry judged against the snapshot."""

    scenario: Scenario
    observed: dict | None = None
    warnings: list[str] = field(default_factory=list)
    signals: Any = None  # gpu_policy.telemetry.ClusterSignals, set by gpu_policy.cluster.compose.observe
    telemetry_unavailable: str | None = None  # why there are no signals, when telemetry was asked for


class ClusterSource(Protocol):
    """A cluster gpu-policy can observe. Backends: a scenario file (the embedded default)
    and ``k8s://`` (gpu_policy.kubernetes); `register_source` adds more."""

    url: str
    #: whether GPU telemetry is simulated from the snapshot when no Prometheus is given
    simulated_telemetry: bool

    def observe(self) -> Observation: ...

    def step_job(self, job: Job) -> Job:
        """The pipeline step's job as this cluster names it (a namespace on Kubernetes)."""
