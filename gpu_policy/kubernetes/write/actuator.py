"""The one actuator of a live cluster: carries a whole plan out on the look it was made on
(docs/kubernetes.md, "Acting"). The controller calls it every round; `apply --execute`,
`reconcile` and the pipeline steps call it through gpu_policy.actions.cycle.

In this order:
1. every reservation the plan may write is checked before the first write (nothing half done);
2. with `Orders.admit`, an Event on each victim pod (`GpuPolicyPreempted`, `GpuPolicyMoved`);
3. compositions: gpu-policy's requests past their deadline rolled back, then GPUs attached and
   detached (gpu_policy.kubernetes.write.attach);
4. marks removed from pods a later plan keeps; broken gangs evicted whole;
5. preemptions and moves: each victim's pods annotated, then evicted (gpu_policy.kubernetes.write.evict);
   a reserved step the plan preempts gives its reservation back instead;
6. the places of moved jobs and of the starting step reserved, stale reservations dropped, in one write;
7. with `Orders.admit`, the gated jobs the plan starts released and the waiting pods told why
   (gpu_policy.kubernetes.write.admit).
Every write runs `fence` first (the planning Lease's check): a planner that lost the Lease
writes nothing more. Events, releases and the Events after them go out side by side, at most
`max_requests_in_flight` at once (gpu_policy.kubernetes.write.inflight); evictions, compositions
and reservations one at a time. What the caller hears as it goes is a `Witness`, always on the
thread that called `carry_out`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from gpu_policy.kubernetes.clocks import Clocks
from gpu_policy.kubernetes.read.pods import PodRef
from gpu_policy.kubernetes.read.reservations import Reservation
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.write.admit import Admission
from gpu_policy.kubernetes.write.attach import RequestWriter
from gpu_policy.kubernetes.write.evict import evict_job, unmark
from gpu_policy.kubernetes.write.events import EventWriter
from gpu_policy.kubernetes.write.inflight import InFlight
from gpu_policy.kubernetes.write.reservations import reservation_for, write_reservations
from gpu_policy.model.cluster import Acted, Observation, Orders, Outcome
from gpu_policy.model.plan import Plan

#: why a broken gang's pods are evicted (gpu_policy.kubernetes.read.workloads)
BROKEN_GANG_REASON = "broken gang: fewer of its pods hold GPUs than its minimum size; evicted whole to restart whole"
#: the Event a victim gets before it goes, by the plan's action
VICTIM_EVENTS = {"preempt": "GpuPolicyPreempted", "move": "GpuPolicyMoved"}


class Witness:
    """What the actuator tells its caller as it writes; this one hears nothing. The controller's
    keeps its informer cache current and counts (gpu_policy.controller.witness)."""

    def request_written(self, name: str, answer: dict) -> None:
        """A ComposabilityRequest write was answered: the request as it now is, or a delete's Status."""

    def acted(self, plan: Plan, snap: Snapshot, outcomes: list[Outcome]) -> None:
        """The plan's own actions are done (compositions, evictions, reservations), before any release."""

    def gangs_reserved(self, config_map: dict | None) -> None:
        """The reservations ConfigMap as written before the gangs' first releases."""

    def released(self, pod: PodRef, node: str, answer: dict) -> None:
        """A gated pod was released onto `node`; `answer` is the pod as patched."""

    def carried_over(self, jobs: list[str]) -> None:
        """Jobs the plan starts whose releases this round's request budget did not hold: the next
        round releases them (it should come at once)."""


@dataclass
class _Reserving:
    """The reservations of one round: those of moved jobs (by job), the starting step's, the
    ones to write and the keys to drop."""

    moved: dict[str, Reservation]
    started: Reservation | None
    write: list[Reservation] = field(default_factory=list)
    stale: set[str] = field(default_factory=set)


class KubernetesActuator:
    """Carries plans out on a live cluster through `client`; `fence` runs before every write
    (`events` runs it too). `read_pod` gives a gated pod's object as it is now (default: a GET;
    the controller passes its cache); `witness` hears what was written."""

    def __init__(self, client: KubeClient, settings: KubernetesSettings, fence: Callable[[], None],
                 events: EventWriter, clocks: Clocks = Clocks(),
                 read_pod: Callable[[str, str], dict | None] | None = None, witness: Witness | None = None):
        self.client, self.settings, self.fence, self.events, self.clocks = client, settings, fence, events, clocks
        self.witness = witness or Witness()
        self.in_flight = InFlight(settings.max_requests_in_flight)
        self.admission = Admission(client, fence, self.events, read_pod or client.read_pod, self.witness,
                                   self.expires_at, self.in_flight)

    def expires_at(self) -> float:
        """When a reservation written now lapses."""
        return self.clocks.wall() + self.settings.reservation_lifetime_s

    def carry_out(self, plan: Plan, observation: Observation, orders: Orders) -> Acted:
        snap: Snapshot = observation.backend
        reserving = self._reservations(plan, observation, orders)
        if orders.execute:
            self.fence()
            if orders.admit:
                self._tell_victims(plan, snap)
        outcomes = self._compose(plan, snap, orders.execute)
        outcomes += self._evict(plan, snap, orders.execute, reserving)
        outcomes += self._reserve(reserving, orders.execute)
        if orders.execute:
            self.witness.acted(plan, snap, outcomes)
        if not orders.admit:
            return Acted(outcomes)
        released, waiting = self.admission.admit(plan, snap, observation.object_warnings,
                                                 [o for o in outcomes if o.action == "attach"], orders.execute)
        return Acted(outcomes + released, waiting)

    def _reservations(self, plan: Plan, observation: Observation, orders: Orders) -> _Reserving:
        """Every reservation this plan may write, checked before the first action (nothing half done)."""
        snap: Snapshot = observation.backend
        jobs = {j.name: j for j in observation.scenario.jobs}
        moved = {d.name: reservation_for(jobs[d.name], d, self.expires_at()) for d in plan.jobs
                 if d.action == "move" and d.name not in snap.reservations}
        step = orders.step
        started = reservation_for(step, plan.job(step.name), self.expires_at()) \
            if step is not None and plan.job(step.name).action == "start" else None
        for r in [*moved.values(), *([started] if started else [])]:
            r.check()
        return _Reserving(moved, started, stale=set(snap.stale))

    def _tell_victims(self, plan: Plan, snap: Snapshot) -> None:
        """Say on each victim pod why it goes, before anything else is written."""
        told = [(ref, VICTIM_EVENTS[d.action], f"{d.code}: {d.reason}", "Normal", "Preempt") for d in plan.jobs
                if d.action in VICTIM_EVENTS and d.name not in snap.reservations for ref in snap.pods.get(d.name, [])]
        self.events.write_many(told, self.in_flight)

    def _compose(self, plan: Plan, snap: Snapshot, execute: bool) -> list[Outcome]:
        """Roll back gpu-policy's requests that missed their deadline, then attach and detach."""
        if snap.composed is None:
            if plan.compositions:
                raise ValueError("the plan composes GPUs, but the cluster has no composition set up")
            return []
        writer = RequestWriter(self.client, snap.composed, self.clocks.wall(), self.fence, self.witness.request_written)
        outcomes = writer.roll_back_overdue() if execute else []
        return outcomes + [writer.carry_out(c, execute) for c in plan.compositions]

    def _evict(self, plan: Plan, snap: Snapshot, execute: bool, reserving: _Reserving) -> list[Outcome]:
        """Unmark the pods the plan keeps, evict broken gangs, then the plan's victims; a moved
        job whose eviction was not blocked is to be reserved, a preempted reservation dropped."""
        victims = {d.name for d in plan.jobs if d.action in VICTIM_EVENTS}
        outcomes = [unmark(self.client, job, refs, self.fence, execute) for job, refs in sorted(snap.marked.items())
                    if job not in victims and job not in snap.broken]
        outcomes += [self._evict_job(name, "preempt", BROKEN_GANG_REASON, pods, execute)
                     for name, pods in sorted(snap.broken.items())]
        for d in plan.jobs:
            if d.action not in VICTIM_EVENTS:
                continue
            if d.name in snap.reservations:  # a step that has no pods yet: give its GPUs back
                reserving.stale.add(snap.reservations[d.name].key)
                outcomes.append(Outcome(d.name, d.action, "done" if execute else "dry run",
                                        "its reservation is released"))
                continue
            outcome = self._evict_job(d.name, d.action, d.reason or d.action, snap.pods.get(d.name, []), execute)
            outcomes.append(outcome)
            if d.action == "move" and outcome.result != "blocked":
                reserving.write.append(reserving.moved[d.name])
        return outcomes

    def _evict_job(self, name: str, action: str, reason: str, pods: list[PodRef], execute: bool) -> Outcome:
        """Annotate and evict every pod of a job (all of a gang's together), or say so in a dry run."""
        if execute:
            return evict_job(self.client, name, action, reason, pods, self.fence, self.clocks.sleep,
                             self.clocks.monotonic)
        return Outcome(name, action, "dry run", f"would annotate and evict {len(pods)} pod"
                       f"{'s' if len(pods) != 1 else ''}: {reason}", [str(p) for p in pods])

    def _reserve(self, reserving: _Reserving, execute: bool) -> list[Outcome]:
        """Write the moved jobs' and the started step's reservations, dropping the stale ones."""
        if reserving.started is not None:
            reserving.write.append(reserving.started)
        if execute and (reserving.write or reserving.stale):
            write_reservations(self.client, reserving.write, reserving.stale, self.fence)
        until = time.strftime("%H:%M:%S", time.gmtime(self.expires_at()))
        return [Outcome(r.job_name, "reserve", "done" if execute else "dry run",
                        f"{r.gpus:g} GPUs x {r.replicas} on {', '.join(r.nodes)} until its pods are bound, "
                        f"at most until {until} UTC") for r in reserving.write]
