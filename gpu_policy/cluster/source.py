"""What a cluster source gives the planner: one `Observation` per look."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from gpu_policy.model import Job, Scenario
from gpu_policy.plan import Plan


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
    backend: Any = None  # what the backend's actuator needs from this look (e.g. the pods of each job)


class ClusterSource(Protocol):
    """A cluster gpu-policy can observe. Backends: a scenario file (the embedded default)
    and ``k8s://`` (gpu_policy.kubernetes); `register_source` adds more."""

    url: str
    #: whether GPU telemetry is simulated from the snapshot when no Prometheus is given
    simulated_telemetry: bool

    def observe(self) -> Observation: ...

    def step_job(self, job: Job) -> Job:
        """The pipeline step's job as this cluster names it (a namespace on Kubernetes)."""


@dataclass
class Outcome:
    """What carrying out one decision did: `action` is preempt, move, reserve or release;
    `result` done, dry run, blocked, gone or skipped; `pods` the objects it touched."""

    job: str
    action: str
    result: str
    detail: str = ""
    pods: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        return f"{self.action} {self.job}: {self.result}" + (f" ({self.detail})" if self.detail else "")


class Actuator(Protocol):
    """A cluster gpu-policy can act on: the embedded one (the scenario as it is after the
    plan) and ``k8s://`` (evictions, reservations, under a lease)."""

    #: whether plans are carried out unless told otherwise (a live cluster: yes; a file: no)
    executes_by_default: bool

    def planning(self) -> AbstractContextManager:
        """Hold this for observe -> decide -> act: one planner at a time."""

    def carry_out(self, plan: Plan, observation: Observation, execute: bool, step: Job | None = None) -> list[Outcome]:
        """Do (or, without `execute`, describe) what `plan` decided on `observation`: evict its
        victims, reserve the places of moved jobs and of the pipeline step `step` when it starts."""
