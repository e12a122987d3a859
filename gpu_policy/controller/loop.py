"""The controller's loop: take in watched changes, lead, plan on change, act.

`step()` does one turn and never waits, so tests drive the loop turn by turn on the
cluster's injected clocks; `run()` calls it until stopped, waiting for the next change or the
next thing due (a debounce ending, a renewal, a resync). Acting is the actuator's, the one
the one-shot commands use (gpu_policy.kubernetes.write.actuator), reading gated pods from the
cache and admitting: Events on victims, compositions, evictions, moves and reservations, then
releases of gated pods and Events on those that wait. What it writes goes into the cache at
once (gpu_policy.controller.witness). Every write passes the fenced Lease's check: a replica
whose last renewal is as old as the lease acts no more. The leader also keeps the queues' usage
history from its looks and writes it every minute (gpu_policy.controller.usage).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from gpu_policy.actions.cycle import plan_observation
from gpu_policy.controller.cache import (COMPOSABILITY_REQUESTS, CONFIG_MAPS, DRA_AND_POD_GROUPS, KAI_QUEUES,
                                         KUEUE_TOPOLOGY_OBJECTS, NAMESPACES, NODES, PODS, Cache)
from gpu_policy.controller.informer import Change, Informer
from gpu_policy.controller.metrics import Metrics
from gpu_policy.controller.telemetry import TelemetryFeed
from gpu_policy.controller.usage import UsageKeeper
from gpu_policy.controller.witness import ControllerWitness
from gpu_policy.errors import ClusterBusy, GpuPolicyError
from gpu_policy.kubernetes.cluster import KubernetesCluster
from gpu_policy.kubernetes.read.look import look
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.write.actuator import KubernetesActuator
from gpu_policy.kubernetes.write.events import EventWriter
from gpu_policy.kubernetes.write.lease import Renewer
from gpu_policy.model.cluster import Observation, Orders, Outcome
from gpu_policy.model.plan import Plan
from gpu_policy.planner import PlannerConfig
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


class Controller:
    def __init__(self, cluster: KubernetesCluster, settings: ControllerSettings | None = None,
                 config: PlannerConfig | None = None, metrics: Metrics | None = None,
                 telemetry: TelemetryFeed | None = None):
        self.cluster, self.settings, self.config = cluster, settings or ControllerSettings(), config
        self.telemetry = telemetry
        self.metrics = metrics or Metrics()
        self.lease, self.clocks = cluster.lease, cluster.clocks
        self.cache = Cache(cluster.settings.gpu_resource)
        self.changes: queue.Queue[Change] = queue.Queue()
        self.stop = threading.Event()
        self.events = EventWriter(cluster.client, self.lease.identity, self.clocks.wall, self.lease.check,
                                  self.settings.resync_s, self.metrics.event_failures.inc)
        self.witness = ControllerWitness(self.cache, self.metrics, self.clocks, config)
        self.actuator = KubernetesActuator(cluster.client, cluster.settings, self.lease.check, self.events, self.clocks,
                                           self.cache.pod, self.witness, self.cache.read_config_map)
        self.usage = UsageKeeper(cluster.client, cluster.settings.namespace, self.lease.check,
                                 self.cache.read_config_map)
        # Kueue's Topologies where served: a change re-plans (the look decides which one is used)
        kinds = [NODES, PODS, NAMESPACES, CONFIG_MAPS, COMPOSABILITY_REQUESTS, *DRA_AND_POD_GROUPS,
                 KUEUE_TOPOLOGY_OBJECTS]
        if cluster.settings.queues != "configmap":
            kinds.append(KAI_QUEUES)
        self.informer = Informer(KubeClient(cluster.api_client, cluster.url, cluster.settings), kinds, self.changes,
                                 self.stop, self.settings.watch_timeout_s,
                                 lambda kind: self.metrics.watch_restarts.labels(kind).inc())
        self.leading = False
        self.dirty_since: float | None = None
        self.planned_at: float | None = None
        self.recheck_at: float | None = None  # a victim's checkpoint deadline: plan again then (monotonic)
        self.plans = 0
        self.last_error: str | None = None
        self._next_look = float("-inf")
        self.renewer: Renewer | None = None  # the Lease's, while this replica leads

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
        self._stop_renewing()
        if self.leading:
            self.leading = False
            self._hand_over_usage()
            self.usage.stop()
            self.metrics.is_leader.set(0)
            try:
                self.lease.release()
            except GpuPolicyError as e:
                log.warning("could not release the Lease: %s", e)

    def step(self) -> bool:
        """One turn: take in changes, lead, and plan and act when due. True when it planned."""
        self.take_changes()
        now = self.clocks.monotonic()
        self._lead(now)
        if not (self.leading and self.cache.synced):
            return False
        self._check_binding(now)
        self._keep_usage()
        if not self.leading:  # a write found the Lease lost
            return False
        changed = self.dirty_since is not None and now - self.dirty_since >= self.settings.debounce_s
        due = self.recheck_at is not None and now >= self.recheck_at
        if not (changed or due) and self.planned_at is not None and now - self.planned_at < self.settings.resync_s:
            return False
        self.dirty_since = self.recheck_at = None
        self.planned_at = now
        self.witness.carried = []
        self.round()
        # what arrived while this round planned, and the releases it carried over, have waited long
        # enough: the next round starts as soon as the debounce, counted from this one's start,
        # allows (at once after a round that long)
        if (self.take_changes() and self.dirty_since is not None) or self.witness.carried:
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
                self.dirty_since = self.clocks.monotonic()

    def _wait(self, seconds: float) -> None:
        """Wait for the next change or `seconds`, whichever comes first."""
        try:
            change = self.changes.get(timeout=max(0.01, seconds))
        except queue.Empty:
            return
        self.changes.put(change)

    def _until_due(self) -> float:
        now = self.clocks.monotonic()
        s, due = self.settings, [] if self.leading else [self._next_look - now]
        if self.dirty_since is not None:
            due.append(s.debounce_s - (now - self.dirty_since))
        if self.planned_at is not None:
            due.append(s.resync_s - (now - self.planned_at))
        if self.recheck_at is not None:
            due.append(self.recheck_at - now)
        usage_due = self.usage.due_in(self.clocks.wall())
        if usage_due is not None:
            due.append(usage_due)
        return max(0.0, min(due + [1.0]))

    # -- leadership -----------------------------------------------------------------------------
    def _lead(self, now: float) -> None:
        """Lead while the Lease is ours (its renewer keeps it, the fence says so); else look at it
        every third of its duration and take it once it is free or expired."""
        if self.leading:
            try:
                self.lease.check()
            except ClusterBusy:
                self._stand_by(self.lease.lost)
            return
        if now < self._next_look:
            return
        self._next_look = now + self.lease.settings.lease_duration_s / 3
        try:
            taken = self.lease.try_acquire()[0]
        except GpuPolicyError as e:
            log.warning("standby: cannot look at the Lease: %s", e)
            return
        if taken:
            log.info("leading as %s", self.lease.identity)
            self.leading, self.planned_at = True, None
            self.renewer = self.lease.renewing()
            self.metrics.is_leader.set(1)

    def _stand_by(self, why: str) -> None:
        log.warning("stopped acting: %s; standing by", why)
        self._stop_renewing(wait=False)  # a renewal in flight ends by itself; this turn does not wait for it
        self.leading = False
        self.usage.stop()
        self.metrics.is_leader.set(0)
        self._next_look = float("-inf")

    def _stop_renewing(self, wait: bool = True) -> None:
        if self.renewer is not None:
            self.renewer.close(wait)
            self.renewer = None

    # -- one round: look, plan, act ---------------------------------------------------------------
    def round(self) -> Plan | None:
        began = time.perf_counter()
        self.cluster.client.begin_round()  # max_requests_per_round bounds this round, not the controller's life
        try:
            snap, warnings, bad = look(self.cache, self.cluster.settings, self.cache.node_views(),
                                       self.cache.pod_views(), self.clocks.wall(), self.cluster.url,
                                       self.cluster.device_plugin_lag, self.cache.bad(), self.usage,
                                       self.cache.memo)
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
        self._lead(self.clocks.monotonic())  # lost while it looked and planned: stand by before any write
        if not self.leading:
            return plan
        outcomes: list[Outcome] = []
        try:
            outcomes = self._act(plan, obs)
        except ClusterBusy as e:
            self._stand_by(str(e))
        except GpuPolicyError as e:  # the API server went away mid-round: the next round tries again
            self._failed(str(e))
        self.usage.hold(snap, outcomes)
        return plan

    def _failed(self, error: str) -> None:
        if error != self.last_error:
            log.warning("round failed: %s", error)
        self.last_error = error

    def _act(self, plan: Plan, obs: Observation) -> list[Outcome]:
        acted = self.actuator.carry_out(plan, obs, Orders(execute=True, admit=True))
        if acted.recheck_in_s is not None:  # a victim's deadline: no change may come before it
            self.recheck_at = self.clocks.monotonic() + acted.recheck_in_s
        self.metrics.pending.clear()
        for w in acted.waiting:
            self.metrics.pending.labels(w.queue, w.why.code).inc(len(w.pods))
        return acted.outcomes

    def _keep_usage(self) -> None:
        """Write the usage history when due (gpu_policy.controller.usage)."""
        now = self.clocks.wall()
        due = self.usage.due_in(now)
        if due is None or due > 0:
            return
        try:
            self.usage.write(now)
        except ClusterBusy as e:
            self._stand_by(str(e))

    def _hand_over_usage(self) -> None:
        """Write the usage history held since the last write before the Lease goes, so that the next
        leader continues from this moment (a leader that is killed loses what it held since)."""
        now = self.clocks.wall()
        if self.usage.due_in(now) is None:
            return
        try:
            self.usage.write(now)
        except ClusterBusy as e:
            log.warning("could not write the usage history before stepping down: %s", e)

    def _check_binding(self, now: float) -> None:
        """Forget released pods once bound or gone; report those not bound in time."""
        unbound = self.witness.unbound
        for uid, r in list(unbound.items()):
            pod = self.cache.pod(r.pod.namespace, r.pod.name)
            if not r.pod.names(pod) or (pod.get("spec") or {}).get("nodeName"):
                del unbound[uid]
            elif not r.reported and now - r.at >= self.settings.bind_timeout_s:
                r.reported = True
                self.metrics.bind_timeouts.inc()
                try:
                    self.events.write(r.pod, "GpuPolicyBindTimeout",
                                      f"released onto node {r.node} {now - r.at:.0f} s ago and not bound yet; its GPUs "
                                      "stay held until it is bound or deleted", "Warning", "Bind")
                except ClusterBusy as e:
                    self._stand_by(str(e))

