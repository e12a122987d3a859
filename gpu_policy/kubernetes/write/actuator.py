"""The one actuator of a live cluster: carries a whole plan out on the look it was made on
(docs/kubernetes.md, "Acting"). The controller calls it every round; `apply --execute`,
`reconcile` and the pipeline steps call it through gpu_policy.actions.cycle.

In this order:
1. every reservation the plan may write is checked before the first write (nothing half done),
   and what becomes of each victim this round is judged (gpu_policy.kubernetes.write.checkpoint_first:
   asked to checkpoint, awaited at its checkpoint, or evicted);
2. with `Orders.admit`, an Event on each victim pod evicted this round (`GpuPolicyPreempted`,
   `GpuPolicyMoved`);
3. compositions: gpu-policy's requests past their deadline rolled back, then GPUs attached and
   detached (gpu_policy.kubernetes.write.attach);
4. marks removed from pods a later plan keeps, checkpoint requests it no longer needs withdrawn;
   broken gangs evicted whole;
5. preemptions and moves: a victim that saves on request asked to (`GpuPolicyCheckpointRequested`),
   one stopped at its checkpoint awaited, and each victim whose time has come annotated, then
   evicted with a grace period long enough for its save (gpu_policy.kubernetes.write.evict); a
   reserved step the plan preempts gives its reservation back instead;
6. the places of moved jobs evicted and of the starting step reserved, stale reservations
   dropped, in one write;
7. with `Orders.admit`, the gated jobs the plan starts released and the waiting pods told why
   (gpu_policy.kubernetes.write.admit); a job that waits for a victim's checkpoint stays gated.
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
from gpu_policy.kubernetes.write.checkpoint_first import (ASKED, WITHDRAWN, Verdict, claimants, holding, judge, recheck_in,
                                                          stamp)
from gpu_policy.kubernetes.write.evict import evict_job, unmark
from gpu_policy.kubernetes.write.events import EventWriter
from gpu_policy.kubernetes.write.inflight import InFlight
from gpu_policy.kubernetes.write.reservations import reservation_for, write_reservations
from gpu_policy.model.cluster import Acted, Observation, Orders, Outcome, Waiting
from gpu_policy.model.plan import JobDecision, Plan

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

    def reservations_written(self, config_map: dict | None) -> None:
        """The reservations ConfigMap as written (None: it does not exist, nothing was to be)."""

    def released(self, pod: PodRef, node: str, answer: dict) -> None:
        """A gated pod was released onto `node`; `answer` is the pod as patched."""

    def carried_over(self, jobs: list[str]) -> None:
        """Jobs the plan starts whose releases this round's request budget did not hold: the next
        round releases them (it should come at once)."""

    def pod_annotated(self, answer: dict) -> None:
        """A victim's pod was asked to checkpoint, awaited, or had that withdrawn: the pod as patched."""

    def checkpoint_request_ended(self, job: str, result: str) -> None:
        """A victim asked to checkpoint was evicted on its answer (`saved`), at its deadline
        (`deadline`), or a later plan kept it (`withdrawn`)."""

    def reclaiming(self, job: str, pods: list[PodRef]) -> None:
        """The plan starts `job` (its gated `pods`) on its victims' GPUs: it waits for them from now."""


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
    (`events` runs it too). `read_pod` gives a pod's object as it is now, before it is released or
    evicted, and `read_config_map` one of gpu-policy's ConfigMaps before it is written (default: a
    GET; the controller passes its cache); `witness` hears what was written."""

    def __init__(self, client: KubeClient, settings: KubernetesSettings, fence: Callable[[], None],
                 events: EventWriter, clocks: Clocks = Clocks(),
                 read_pod: Callable[[str, str], dict | None] | None = None, witness: Witness | None = None,
                 read_config_map: Callable[[str], dict | None] | None = None):
        self.client, self.settings, self.fence, self.events, self.clocks = client, settings, fence, events, clocks
        self.witness = witness or Witness()
        self.in_flight = InFlight(settings.max_requests_in_flight)
        self.read_pod = read_pod or client.read_pod
        self.read_config_map = read_config_map or client.read_config_map
        self.admission = Admission(client, fence, self.events, self.read_pod, self.witness, self.expires_at,
                                   self.in_flight, self.read_config_map)

    def expires_at(self) -> float:
        """When a reservation written now lapses."""
        return self.clocks.wall() + self.settings.reservation_lifetime_s

    def carry_out(self, plan: Plan, observation: Observation, orders: Orders) -> Acted:
        snap: Snapshot = observation.backend
        reserving = self._reservations(plan, observation, orders)
        now = self.clocks.wall()
        verdicts = self._judge(plan, snap, now)
        held = holding(plan, verdicts)
        if orders.step is not None and orders.step.name in held:
            reserving.started = None  # the step starts on GPUs that are not free yet: no reservation
        if orders.execute:  # every eviction is said on its pod first, whoever carries the plan out
            self.fence()
            self._tell_victims(plan, snap, verdicts)
        outcomes = self._compose(plan, snap, orders.execute)
        outcomes += self._evict(plan, snap, orders.execute, reserving, verdicts)
        outcomes += self._reserve(reserving, orders.execute)
        if orders.execute:
            self.witness.acted(plan, snap, outcomes)
            for job in claimants(plan, verdicts):
                self.witness.reclaiming(job, snap.gated.get(job, []))
        recheck = recheck_in(verdicts, now)
        if not orders.admit:
            step = orders.step.name if orders.step is not None else None
            return Acted(outcomes, [Waiting(step, plan.job(step).queue, [], held[step])] if step in held else [],
                         recheck)
        released, waiting = self.admission.admit(plan, snap, observation.object_warnings,
                                                 [o for o in outcomes if o.action == "attach"], orders.execute, held)
        return Acted(outcomes + released, waiting, recheck)

    def _judge(self, plan: Plan, snap: Snapshot, now: float) -> dict[str, Verdict]:
        """What this round does with each victim the plan preempts or moves (a reserved step
        that has no pods: nothing, it gives its reservation back)."""
        jobs = {j.name: j for j in snap.scenario.jobs}
        return {d.name: judge(d, jobs.get(d.name), [snap.views[r.uid] for r in snap.pods.get(d.name, [])
                                                    if r.uid in snap.views], now, self.settings.checkpoint_deadline_s)
                for d in plan.jobs if d.stops and d.name not in snap.reservations}

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

    def _tell_victims(self, plan: Plan, snap: Snapshot, verdicts: dict[str, Verdict]) -> None:
        """Say on each victim pod evicted this round why it goes, before anything else is written."""
        told = [(ref, VICTIM_EVENTS[d.action], f"{d.code}: {d.reason}", "Normal", "Preempt") for d in plan.jobs
                if d.name in verdicts and verdicts[d.name].evict for ref in snap.pods.get(d.name, [])]
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

    def _evict(self, plan: Plan, snap: Snapshot, execute: bool, reserving: _Reserving,
               verdicts: dict[str, Verdict]) -> list[Outcome]:
        """Unmark the pods the plan keeps and withdraw their checkpoint requests, evict broken
        gangs, then carry out the plan's victims; a moved job evicted (not blocked) is to be
        reserved, a preempted reservation dropped."""
        victims = {d.name for d in plan.jobs if d.stops}
        outcomes = [unmark(self.client, job, refs, self.fence, execute) for job, refs in sorted(snap.marked.items())
                    if job not in victims and job not in snap.broken]
        outcomes += [self._withdraw(job, refs, snap, execute) for job, refs in sorted(snap.asked.items())
                     if job not in victims and job not in snap.broken]
        outcomes += [self._evict_job(name, "preempt", BROKEN_GANG_REASON, pods, execute)
                     for name, pods in sorted(snap.broken.items())]
        gets = claimants(plan, verdicts)
        return outcomes + [self._victim(d, snap, execute, reserving, verdicts.get(d.name),
                                        sorted(j for j, victims in gets.items() if d.name in victims))
                           for d in plan.jobs if d.stops]

    def _victim(self, d: JobDecision, snap: Snapshot, execute: bool, reserving: _Reserving, verdict: Verdict | None,
                gets: list[str]) -> Outcome:
        """One victim: asked, awaited or evicted as judged (`gets`: the jobs that wait for its GPUs)."""
        if d.name in snap.reservations:  # a step that has no pods yet: give its GPUs back
            reserving.stale.add(snap.reservations[d.name].key)
            return Outcome(d.name, d.action, "done" if execute else "dry run", "its reservation is released")
        pods = snap.pods.get(d.name, [])
        if not verdict.evict:
            return self._ask(d, verdict, pods, gets, execute)
        outcome = self._evict_job(d.name, d.action, d.reason or d.action, pods, execute, verdict.grace)
        if execute and verdict.kind == ASKED and outcome.result != "blocked":
            self.witness.checkpoint_request_ended(d.name, verdict.result)
        if d.action == "move" and outcome.result != "blocked":
            reserving.write.append(reserving.moved[d.name])
        return outcome

    def _ask(self, d: JobDecision, verdict: Verdict, pods: list[PodRef], gets: list[str], execute: bool) -> Outcome:
        """A victim that is not evicted this round: its pods not asked (or awaited) yet are, with
        an Event on each that is asked to save; or it waits for its answer."""
        names, kind = [str(p) for p in pods], "asked" if verdict.kind == ASKED else "awaited"
        if not verdict.mark:
            return Outcome(d.name, d.action, "waiting", verdict.state(), names)
        if not execute:
            return Outcome(d.name, d.action, "dry run", f"would be {kind}: {verdict.state()}", names)
        note = (f"{d.code}: {d.reason}; asked to save a checkpoint first" + (f" for {', '.join(gets)}" if gets else "")
                + f"; evicted once it has saved, at the latest at {stamp(verdict.deadline)}")
        for ref in verdict.mark:
            self.fence()
            answer = self.client.patch_pod_metadata(ref.namespace, ref.name, verdict.notes())
            if answer is not None:
                self.witness.pod_annotated(answer)
                if verdict.kind == ASKED:
                    self.events.write(ref, "GpuPolicyCheckpointRequested", note, action="Preempt")
        return Outcome(d.name, d.action, kind, verdict.state(), names)

    def _withdraw(self, job: str, pods: list[PodRef], snap: Snapshot, execute: bool) -> Outcome:
        """A later plan keeps a victim asked to save or awaited: remove the marks, its trainer trains on."""
        names = [str(p) for p in pods]
        asked = any(snap.views[p.uid].checkpoint_requested is not None for p in pods if p.uid in snap.views)
        what = "its checkpoint request" if asked else "its awaited checkpoint"
        if not execute:
            return Outcome(job, "withdraw", "dry run", f"would withdraw {what}: the plan keeps it", names)
        for ref in pods:
            self.fence()
            answer = self.client.patch_pod_metadata(ref.namespace, ref.name, dict(WITHDRAWN))
            if answer is not None:
                self.witness.pod_annotated(answer)
        if asked:
            self.witness.checkpoint_request_ended(job, "withdrawn")
        return Outcome(job, "withdraw", "done", f"withdrew {what}: the plan keeps it, and it trains on", names)

    def _evict_job(self, name: str, action: str, reason: str, pods: list[PodRef], execute: bool,
                   grace: dict[str, int] | None = None) -> Outcome:
        """Annotate and evict every pod of a job (all of a gang's together), or say so in a dry run."""
        if execute:
            return evict_job(self.client, name, action, reason, pods, self.fence, self.read_pod, self.clocks.sleep,
                             self.clocks.monotonic, grace)
        seconds = sorted(set((grace or {}).values()))
        return Outcome(name, action, "dry run", f"would annotate and evict {len(pods)} pod"
                       f"{'s' if len(pods) != 1 else ''}"
                       + (f" (grace period {', '.join(map(str, seconds))} s)" if seconds else "") + f": {reason}",
                       [str(p) for p in pods])

    def _reserve(self, reserving: _Reserving, execute: bool) -> list[Outcome]:
        """Write the moved jobs' and the started step's reservations, dropping the stale ones."""
        if reserving.started is not None:
            reserving.write.append(reserving.started)
        if execute and (reserving.write or reserving.stale):
            self.witness.reservations_written(write_reservations(self.client, reserving.write, reserving.stale,
                                                                 self.fence, self.read_config_map))
        until = time.strftime("%H:%M:%S", time.gmtime(self.expires_at()))
        return [Outcome(r.job_name, "reserve", "done" if execute else "dry run",
                        f"{r.gpus:g} GPUs x {r.replicas} on {', '.join(r.nodes)} until its pods are bound, "
                        f"at most until {until} UTC") for r in reserving.write]
