"""The controller's loop: take in watched changes, lead, plan on change, act.

`step()` does one turn and never waits, so tests drive the loop turn by turn on an
injected clock; `run()` calls it until stopped, waiting for the next change or the next
thing due (a debounce ending, a renewal, a resync). Acting: Events on victims, then
compositions, evictions, moves and reservations by the one-shot actuator
(KubernetesCluster.carry_out; what the controller adds to composition:
gpu_policy.controller.composition), then releases of gated pods and Events on those that wait.
Every write passes the fenced Lease's check: a replica whose last renewal is as old as the
lease acts no more.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from gpu_policy.actions.cycle import plan_observation
from gpu_policy.model.cluster import Observation
from gpu_policy.controller.admission import release_patches, send_releases
from gpu_policy.controller.cache import (COMPOSABILITY_REQUESTS, CONFIG_MAPS, DRA_AND_POD_GROUPS, KAI_QUEUES, NAMESPACES,
                                         NODES, PODS, Cache)
from gpu_policy.controller.composition import Composition
from gpu_policy.controller.events import NOT_ADMITTED, EventWriter
from gpu_policy.controller.informer import Change, Informer
from gpu_policy.controller.metrics import Metrics
from gpu_policy.controller.telemetry import TelemetryFeed
from gpu_policy.errors import ClusterBusy, GpuPolicyError
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.cluster import KubernetesCluster
from gpu_policy.kubernetes.read.isolate import LEFT_OUT, ObjectWarning
from gpu_policy.kubernetes.read.look import look
from gpu_policy.kubernetes.read.pods import PodRef, PodView
from gpu_policy.kubernetes.write.reservations import write_reservations
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.model.plan import JobDecision, Placement, Plan
from gpu_policy.planner import PlannerConfig
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.gc_tuning import tune_gc

log = logging.getLogger(__name__)

@dataclass
class ControllerSettings:
    debounce_s: float = 0.2
    """A plan starts this long after the first change that can matter (more may arrive meanwhile)."""
    resync_s: float = 60.0
    """With no change, plan the cached cluster again this often (no LIST)."""
    bind_timeout_s: float = 120.0
    """A released pod not bound within this is reported (Event and metric), never deleted."""
    watch_timeout_s: float = 300.0
    """Each WATCH asks the API server to end it after this; it is resumed at once."""


@dataclass
class Released:
    pod: PodRef
    node: str
    at: float  # monotonic time of the release
    reported: bool = False


class Controller:
    def __init__(self, cluster: KubernetesCluster, settings: ControllerSettings | None = None,
                 config: PlannerConfig | None = None, metrics: Metrics | None = None,
                 telemetry: TelemetryFeed | None = None):
        self.cluster, self.settings, self.config = cluster, settings or ControllerSettings(), config
        self.telemetry = telemetry
        self.metrics = metrics or Metrics()
        self.lease = cluster.lease
        self._monotonic, self._clock = cluster._monotonic, cluster._clock
        self.cache = Cache(cluster.settings.gpu_resource)
        self.changes: queue.Queue[Change] = queue.Queue()
        self.stop = threading.Event()
        self.events = EventWriter(cluster.client, self.lease.identity, self._clock, self.lease.check,
                                  self.settings.resync_s, self.metrics.event_failures.inc)
        self.composition = Composition(self.cache, self.metrics)
        cluster.on_request_written = self.composition.seen
        kinds = [NODES, PODS, NAMESPACES, CONFIG_MAPS, COMPOSABILITY_REQUESTS, *DRA_AND_POD_GROUPS]
        if cluster.settings.queues != "configmap":
            kinds.append(KAI_QUEUES)
        self.informer = Informer(KubeClient(cluster.api_client, cluster.url, cluster.settings), kinds, self.changes,
                                 self.stop, self.settings.watch_timeout_s,
                                 lambda kind: self.metrics.watch_restarts.labels(kind).inc())
        self.leading = False
        self.dirty_since: float | None = None
        self.planned_at: float | None = None
        self.plans = 0
        self.released: dict[str, Released] = {}  # pod uid -> its release, until it is bound or gone
        self.last_error: str | None = None
        self._renew_sent = self._next_look = float("-inf")

    # -- the loop -------------------------------------------------------------------------------
    def start(self) -> None:
        """LIST every kind and start the watches (the cache is synced after the next step)."""
        self.informer.start()
        if self.telemetry is not None:
            self.telemetry.start(self.stop)

    def ready(self) -> bool:
        return self.cache.synced

    def run(self) -> None:
        """Turn until `stop` is set; then release the Lease (the action in flight finishes first).
        While it runs, the cyclic garbage collector runs less often (`planner.gc_tuning`)."""
        tune_gc()
        try:
            while not self.stop.is_set():
                self.step()
                self._wait(self._until_due())
        finally:
            self.shut_down()

    def shut_down(self) -> None:
        self.stop.set()
        if self.leading:
            self.leading = False
            self.metrics.is_leader.set(0)
            try:
                self.lease.release()
            except GpuPolicyError as e:
                log.warning("could not release the Lease: %s", e)

    def step(self) -> bool:
        """One turn: take in changes, lead, and plan and act when due. True when it planned."""
        self.take_changes()
        now = self._monotonic()
        self._lead(now)
        if not (self.leading and self.cache.synced):
            return False
        self._check_binding(now)
        changed = self.dirty_since is not None and now - self.dirty_since >= self.settings.debounce_s
        if not changed and self.planned_at is not None and now - self.planned_at < self.settings.resync_s:
            return False
        self.dirty_since = None
        self.planned_at = now
        self.round()
        # what arrived while this round planned has waited long enough: it is planned as soon as
        # the debounce, counted from the round's start, allows (at once after a round that long)
        if self.take_changes() and self.dirty_since is not None:
            self.dirty_since = now
        return True

    def take_changes(self, wait_s: float = 0.0) -> int:
        """Move what the watches delivered into the cache (waiting up to `wait_s` for the first)."""
        taken = 0
        while True:
            try:
                change = self.changes.get(timeout=wait_s) if wait_s > 0 and not taken else self.changes.get_nowait()
            except queue.Empty:
                return taken
            taken += 1
            if change.change == "LISTED":
                self.cache.replace(change.kind, change.objects)
                matters = True
            else:
                matters = self.cache.apply(change.kind, change.change, change.obj)
            if matters and self.dirty_since is None:
                self.dirty_since = self._monotonic()

    def _wait(self, seconds: float) -> None:
        """Wait for the next change or `seconds`, whichever comes first."""
        try:
            change = self.changes.get(timeout=max(0.01, seconds))
        except queue.Empty:
            return
        self.changes.put(change)

    def _until_due(self) -> float:
        now = self._monotonic()
        s, due = self.settings, [self.lease.settings.lease_duration_s / 3 - (now - self._renew_sent)]
        if self.dirty_since is not None:
            due.append(s.debounce_s - (now - self.dirty_since))
        if self.planned_at is not None:
            due.append(s.resync_s - (now - self.planned_at))
        return max(0.0, min(due + [1.0]))

    # -- leadership -----------------------------------------------------------------------------
    def _lead(self, now: float) -> None:
        every = self.lease.settings.lease_duration_s / 3
        if self.leading:
            if now - self._renew_sent >= every:
                self._renew_sent = now
                try:
                    self.lease.renew()
                except GpuPolicyError as e:
                    self.lease.lost = str(e)
            if self.lease.lost:
                self._stand_by(self.lease.lost)
            return
        if now < self._next_look:
            return
        self._next_look = now + every
        try:
            taken = self.lease.try_acquire()[0]
        except GpuPolicyError as e:
            log.warning("standby: cannot look at the Lease: %s", e)
            return
        if taken:
            log.info("leading as %s", self.lease.identity)
            self.leading, self._renew_sent, self.planned_at = True, now, None
            self.metrics.is_leader.set(1)

    def _stand_by(self, why: str) -> None:
        log.warning("stopped acting: %s; standing by", why)
        self.leading = False
        self.metrics.is_leader.set(0)
        self._next_look = float("-inf")

    # -- one round: look, plan, act ---------------------------------------------------------------
    def round(self) -> Plan | None:
        began = time.perf_counter()
        self.cluster.client.begin_round()  # max_requests_per_round bounds this round, not the controller's life
        try:
            snap, warnings, bad = look(self.cache, self.cluster.settings, self.cache.node_views(),
                                       self.cache.pod_views(), self._clock(), self.cluster.url,
                                       self.cluster.device_plugin_lag, self.cache.bad())
        except GpuPolicyError as e:  # a bad object or queue definition: say so, plan again on its fix
            self._failed(str(e))
            return None
        obs = Observation(snap.scenario, None, warnings + snap.warnings, backend=snap, object_warnings=bad)
        if self.telemetry is not None:
            obs.signals, obs.telemetry_unavailable = self.telemetry.judge(snap.scenario)
        plan = plan_observation(obs, self.config)
        self.metrics.plan_seconds.observe(time.perf_counter() - began)
        self.plans += 1
        self.metrics.show_queues(plan.queues)
        self._lead(self._monotonic())  # a long look and plan: renew (if due) before the first write
        if not self.leading:
            return plan
        try:
            self._act(plan, obs, snap)
        except ClusterBusy as e:
            self._stand_by(str(e))
        except GpuPolicyError as e:  # the API server went away mid-round: the next round tries again
            self._failed(str(e))
        return plan

    def _failed(self, error: str) -> None:
        if error != self.last_error:
            log.warning("round failed: %s", error)
        self.last_error = error

    def _act(self, plan: Plan, obs: Observation, snap: Snapshot) -> None:
        self.lease.check()
        for d in plan.jobs:
            if d.action in ("preempt", "move") and d.name not in snap.reservations:
                what = "GpuPolicyPreempted" if d.action == "preempt" else "GpuPolicyMoved"
                for ref in snap.pods.get(d.name, []):
                    self.events.write(ref, what, f"{d.code}: {d.reason}", action="Preempt")
        outcomes = self.cluster.carry_out(plan, obs, execute=True)
        self.composition.took(snap, outcomes)
        for outcome in outcomes:
            log.info("%s", outcome.line())
            if outcome.result == "done" and outcome.action in ("preempt", "move"):
                d = plan.job(outcome.job)
                if d.action == "preempt":
                    self.metrics.preemptions.labels(d.queue, d.code).inc()
                else:
                    self.metrics.moves.labels(d.queue).inc()
        self._admit(plan, snap, obs.object_warnings)

    def _admit(self, plan: Plan, snap: Snapshot, bad: list[ObjectWarning]) -> None:
        """Release the gated jobs the plan starts (and a reserved job's pods still gated, onto
        its reserved nodes): check every pod first, reserve the gangs, send the patches; then
        write the Admitted Events and say why the others wait (releases first: they are what
        pods wait for, Events are not)."""
        decided = {d.name: d for d in plan.jobs}
        jobs = {j.name: j for j in snap.scenario.jobs}
        shares = {q.name: f"; {q.name} {q.allocated_before:g} -> {q.allocated_after:g} GPUs" for q in plan.queues}
        releases, waiting = [], []
        for name, refs in snap.gated.items():
            d = decided.get(name)
            reservation = snap.reservations.get(name)
            if reservation is not None:
                places = _unheld([Placement(n, reservation.gpus, list(ix)) for n, ix in
                                  zip(reservation.nodes, reservation.gpu_indices or [[]] * len(reservation.nodes))],
                                 snap.held.get(name, []))
                patches = release_patches(refs, places, reservation.gpus < 1, self.cache.pod)
                share = shares.get(reservation.queue, "")
            elif d is not None and d.action == "start":
                patches = self.composition.hold(d) or release_patches(refs, d.replicas, jobs[name].is_fractional,
                                                                      self.cache.pod)
                share = shares.get(d.queue, "")
            else:
                waiting.append((name, refs, d, _waiting_reason(name, d, snap)))
                continue
            if isinstance(patches, Reason):
                waiting.append((name, refs, d, patches))
            else:
                releases.append((name, refs, d, patches, share))
        self._reserve_gangs([d for name, _, d, patches, _ in releases if len(patches) > 1
                             and name not in snap.reservations], snap)
        admitted: list[tuple[PodRef, str]] = []
        for name, refs, d, patches, share in releases:
            gated, why = self._release(name, refs, patches, share, admitted)
            if why is not None:
                waiting.append((name, gated, d, why))
        for ref, note in admitted:
            self.events.write(ref, "GpuPolicyAdmitted", note)
        waiting += self._left_out(bad)
        self.metrics.pending.clear()
        self.events.keep_only({ref.uid for _, refs, _, _ in waiting for ref in refs})
        for name, refs, d, why in waiting:
            queue_name = d.queue if d is not None else (jobs[name].queue if name in jobs else "")
            self.metrics.pending.labels(queue_name, why.code).inc(len(refs))
            never = why.code in NOT_ADMITTED
            for ref in refs:
                self.events.waiting(ref, why.code, why.text, "Warning" if never else "Normal",
                                    "GpuPolicyNotAdmitted" if never else "GpuPolicyWaiting")

    def _reserve_gangs(self, starts: list[JobDecision], snap: Snapshot) -> None:
        """Write the placement of every gang about to be released as a reservation, in one write,
        before its first pod is released: a gang released part way (a refused patch, the API
        server or the lease lost, this process killed) is then held whole in every snapshot, by
        any replica, until the next round releases the rest onto the same nodes."""
        gangs = [self.cluster._reservation(snap.scenario.jobs, d) for d in starts]
        for r in gangs:
            r.check()
        if gangs:  # seen at once: the next round finds the reservation even before its watch event
            self.cache.apply(CONFIG_MAPS, "MODIFIED", write_reservations(self.cluster.client, gangs, set(),
                                                                          self.lease.check))

    def _left_out(self, bad: list[ObjectWarning]) -> list[tuple[str, list[PodRef], None, Reason]]:
        """The pods the look left out or left waiting (issue 29): each is told why, naming the
        field and the value, as a gated pod that waits is."""
        out = []
        for w in bad:
            pod = self.cache.pod(*w.pod) if w.pod is not None else None
            uid = (pod.get("metadata") or {}).get("uid") if pod is not None else None
            if isinstance(uid, str) and uid:
                code = "UnreadablePod" if w.outcome == LEFT_OUT else "NoNodeFits"
                namespace, name = w.pod
                out.append((f"{namespace}/{name}", [PodRef(namespace, name, uid)], None, Reason(code, w.line())))
        return out

    def _release(self, name: str, refs: list[PodRef], patches: list[tuple[PodRef, str, list[dict]]], share: str,
                 admitted: list[tuple[PodRef, str]]) -> tuple[list[PodRef], Reason | None]:
        """Send the job's release patches; each released pod's Admitted Event (its node, and
        `share`: its queue's GPUs before and after the plan) is added to `admitted`. Returns
        the pods still gated and why, or ([], None)."""
        done: list[PodRef] = []

        def released(ref: PodRef, node: str, pod: dict) -> None:
            self.cache.apply(PODS, "MODIFIED", pod)  # seen at once: the next round does not release it again
            self.released[ref.uid] = Released(ref, node, self._monotonic())
            self.events.forget(ref.uid)
            created = self.cache.views[PODS].get((ref.namespace, ref.name))
            if isinstance(created, PodView):
                self.metrics.admission_wait.observe(max(0.0, self._clock() - created.created))
            admitted.append((ref, f"Admitted: onto {node}{share} (a replica of {name})"))
            done.append(ref)

        try:
            why = send_releases(self.cluster.client, patches, self.lease.check, released)
        finally:  # also when a write raised part way: say what was released
            if 0 < len(done) < len(refs):
                log.warning("%s: released %d of its %d gated pods; the rest stay gated on their reserved nodes and "
                            "are released next round", name, len(done), len(refs))
            elif done:
                log.info("released %s: %d pod%s", name, len(done), "s" if len(done) > 1 else "")
        return [r for r in refs if r not in done], why

    def _check_binding(self, now: float) -> None:
        """Forget released pods once bound or gone; report those not bound in time."""
        for uid, r in list(self.released.items()):
            pod = self.cache.pod(r.pod.namespace, r.pod.name)
            if pod is None or (pod.get("metadata") or {}).get("uid") != uid or (pod.get("spec") or {}).get("nodeName"):
                del self.released[uid]
            elif not r.reported and now - r.at >= self.settings.bind_timeout_s:
                r.reported = True
                self.metrics.bind_timeouts.inc()
                try:
                    self.events.write(r.pod, "GpuPolicyBindTimeout",
                                      f"released onto node {r.node} {now - r.at:.0f} s ago and not bound yet; its GPUs "
                                      "stay held until it is bound or deleted", "Warning", "Bind")
                except ClusterBusy as e:
                    self._stand_by(str(e))


def _unheld(places: list[Placement], held: list[str]) -> list[Placement]:
    """A reservation's places less one on each node a pod of the job already holds."""
    left, out = list(held), []
    for place in places:
        if place.node in left:
            left.remove(place.node)
        else:
            out.append(place)
    return out


def _waiting_reason(name: str, decision: JobDecision | None, snap: Snapshot) -> Reason:
    """Why a gated job the plan does not start waits: its gang's missing pods, the plan's
    reason, or (no decision) that gpu-policy does not plan it."""
    if name in snap.incomplete:
        return Reason("WaitingForGang", snap.incomplete[name])
    if decision is None:
        return Reason("NotManaged", "gpu-policy does not plan it: it names no queue gpu-policy knows, or asks for a "
                                    "GPU resource gpu-policy does not count (see the plan's warnings)")
    return Reason(decision.code, decision.reason)
