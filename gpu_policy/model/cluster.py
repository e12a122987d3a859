"""What a cluster source gives the planner: one `Observation` per look."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from gpu_policy.model import Job, Scenario
from gpu_policy.model.plan import Plan


@dataclass
class Observation:
    """One look at a cluster: its snapshot as a scenario, what the look cost (a live
    cluster's `observed`: source, api_calls, objects, bytes, seconds; None for the embedded
    one), what a person should know, and the GPU telemetry judged against the snapshot."""

    scenario: Scenario
    observed: dict | None = None
    warnings: list[str] = field(default_factory=list)
    signals: Any = None  # gpu_policy.telemetry.ClusterSignals, set by gpu_policy.actions.cycle.observe
    telemetry_unavailable: str | None = None  # why there are no signals, when telemetry was asked for
    backend: Any = None  # what the backend's actuator needs from this look (e.g. the pods of each job)
    #: objects left out of this look, structured (gpu_policy.kubernetes.read.isolate.ObjectWarning), their
    #: lines also in `warnings`: a controller writes them as Events on the objects
    object_warnings: list = field(default_factory=list)


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
    """What carrying out one decision did: `action` is preempt, move, unmark, withdraw, reserve,
    release, attach or detach (then `job` names the node); `result` done, dry run, blocked, gone,
    skipped, requested or failed, and for a victim not evicted yet asked (to checkpoint, this
    round), awaited (at its periodic checkpoint, from this round) or waiting (for either);
    `pods` the objects it touched."""

    job: str
    action: str
    result: str
    detail: str = ""
    pods: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        return f"{self.action} {self.job}: {self.result}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class AttachProgress:
    """One look at GPUs being attached for a step: `done` (they are usable), `failed`
    (they will not come: `text` says why, verbatim from the operator), or neither (`text`
    says what is awaited, e.g. "waiting for 2 A100-80GB to be attached to node-3: NodeAllocating")."""

    done: bool
    failed: bool
    text: str


class AttachWaiter(Protocol):
    """GPUs a starting step waits for; each `poll` looks once."""

    def poll(self) -> AttachProgress: ...


@dataclass(frozen=True)
class Orders:
    """What a caller asks of one round of acting on a plan."""

    execute: bool
    """Write (False: a dry run, which only describes what it would do and writes nothing)."""
    step: Job | None = None
    """The pipeline step the plan was made for: when the plan starts it, its place is reserved."""
    admit: bool = False
    """Also release the gated pods the plan starts (a gang's replicas in one round) and say on the
    pods why (Events on victims, released and waiting pods): the controller always does, a one-shot
    command only when asked (`apply --release`)."""


@dataclass(frozen=True)
class WaitReason:
    """Why a gated job stays gated: a reason code (gpu_policy.planner.codes.CODES) and the sentence."""

    code: str
    text: str


@dataclass
class Waiting:
    """A gated job that stays gated this round, and why: its queue ("" when gpu-policy knows
    none) and its pods as the backend names them (on Kubernetes a PodRef, whose `str()` is
    "namespace/name")."""

    job: str
    queue: str
    pods: list
    why: WaitReason


@dataclass
class Acted:
    """What carrying out one plan did: an outcome per action, the gated jobs that still wait (when
    admitting; else the pipeline step, when it waits for a victim's checkpoint), and when to
    plan again though nothing changes (`recheck_in_s`, seconds: a victim's deadline; None: no need)."""

    outcomes: list[Outcome] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    recheck_in_s: float | None = None


class Actuator(Protocol):
    """Carries a whole plan out on the look it was made on. Backends: the embedded cluster (the
    scenario as it is after the plan) and ``k8s://`` (gpu_policy.kubernetes.write.actuator)."""

    def carry_out(self, plan: Plan, observation: Observation, orders: Orders) -> Acted:
        """Do (or, without `orders.execute`, describe) what `plan` decided on `observation`: attach
        and detach GPUs, evict its victims, reserve the places of moved jobs and of the pipeline
        step `orders.step` when it starts, and with `orders.admit` release the gated jobs it starts."""


class ActingCluster(ClusterSource, Protocol):
    """A cluster gpu-policy can act on: its actuator, and the planning lock held from the look to
    the last write (on Kubernetes, the Lease)."""

    #: whether plans are carried out unless told otherwise (a live cluster: yes; a file: no)
    executes_by_default: bool
    #: what carries its plans out
    actuator: Actuator

    def planning(self) -> AbstractContextManager:
        """Hold this for observe -> decide -> act: one planner at a time."""

    def attach_waiter(self, plan: Plan, observation: Observation, step: Job,
                      outcomes: list[Outcome]) -> AttachWaiter | None:
        """What the started `step` must wait for after acting did `outcomes`: GPUs being attached
        to its nodes (asked for by this plan or an earlier one); None when its GPUs are there."""
