"""One planner at a time: the Lease `gpu-policy-planner` (coordination.k8s.io/v1).

observe -> decide -> act runs while holding it. It is acquired with optimistic
concurrency (a write carries the resourceVersion read; 409 means another planner wrote
first), taken over only after ``renewTime + leaseDurationSeconds`` has passed, renewed
every third of its duration by a thread of its own (`Renewer`, as client-go's leader
election renews from a goroutine of its own: no long round starves it), and released at the
end by an update that clears the holder (never deleted). A planner that dies holding it is
replaced once the lease expires.

Fencing (docs/security.md): `check()`, called before every write, stops acting once the
last successful renewal is as old as the lease, counted from when that renewal was *sent*
(a renewal that took long to answer buys no time). A Lease another holder wrote is read as
untrusted: fields of the wrong type count as absent, a duration is clamped to
`max_foreign_lease_s`, and a record that has not changed for that long is expired whatever
its renewTime says (a renewTime in the future would otherwise stop every planner); taking
such a lease over is reported.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from contextlib import contextmanager
from datetime import datetime
from typing import Iterator

from gpu_policy.errors import ClusterBusy, ClusterObjectError, GpuPolicyError
from gpu_policy.kubernetes.clocks import Clocks, stamp
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.names import LEASE_NAME

log = logging.getLogger(__name__)


def new_identity() -> str:
    """Who holds the lease: host, process and a random suffix (two planners never share one)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _moment(text) -> float | None:
    if not text or not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _whole(value, default: int = 0) -> int:
    """A whole number from a field another writer set, else `default`."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _version_of(obj: dict, where: str) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(version, str) or not version:
        raise ClusterObjectError(where, "metadata.resourceVersion", "must be a non-empty string (the API server "
                                                                    f"sets it), got {version!r}"[:200])
    return version


class PlanningLease:
    """The planning lease of one planner (`identity`). Use `held()` as a context manager."""

    def __init__(self, client: KubeClient, identity: str, clocks: Clocks = Clocks()):
        self.client = client
        self.identity = identity
        self.settings = client.settings
        self.clocks = clocks
        self._clock, self._sleep, self._monotonic = clocks.wall, clocks.sleep, clocks.monotonic
        self._version: str | None = None  # the resourceVersion of our last write
        self._spec: dict = {}
        self.lost: str | None = None  # why we no longer hold it, once that happens
        self._lock = threading.Lock()
        self.renewed_at: float | None = None  # monotonic time the last successful write was sent
        self._seen: tuple | None = None  # another holder's record as first seen, and when (monotonic)

    @property
    def where(self) -> str:
        return f"Lease {self.settings.namespace}/{LEASE_NAME}"

    @contextmanager
    def held(self) -> Iterator[PlanningLease]:
        """Hold the lease for the block, renewing it in the background; release it after."""
        self.acquire()
        renewer = self.renewing()
        try:
            yield self
        finally:
            renewer.close()
            self.release()

    def renewing(self) -> Renewer:
        """Renew the lease just taken from a thread of its own until told to stop or it is lost."""
        return Renewer(self)

    def check(self) -> None:
        """Raise ClusterBusy when the lease was lost (another planner took it over, or the last
        renewal is as old as the lease): act no more."""
        with self._lock:
            self._fence()
        if self.lost:
            raise ClusterBusy(f"{self.client.where}: {self.where}: lost the planning lease ({self.lost}); "
                              "nothing more was done")

    def _fence(self) -> None:
        """Lose the lease once its last renewal is as old as the lease (the caller holds `_lock`)."""
        age = None if self.renewed_at is None else self._monotonic() - self.renewed_at
        if not self.lost and age is not None and age >= self.settings.lease_duration_s:
            self.lost = (f"its last renewal was sent {age:.0f} s ago and the lease lasts "
                         f"{self.settings.lease_duration_s:g} s")

    def acquire(self) -> None:
        s = self.settings
        deadline = self._monotonic() + s.lease_wait_s
        while True:
            taken, holder, renewed, now = self.try_acquire()
            if taken:
                return
            if holder is None:
                continue  # another planner wrote first: look again at once
            if self._monotonic() + s.lease_poll_s > deadline:
                age = f", renewed {now - renewed:.0f} s ago" if renewed and renewed <= now else ""
                raise ClusterBusy(f"{self.client.where}: {self.where} is held by {holder}{age}; gave up after "
                                  f"waiting {s.lease_wait_s:g} s for it")
            self._sleep(s.lease_poll_s)

    def _expired(self, lease: dict, spec: dict, renewed: float | None, now: float) -> tuple[bool, str]:
        """Whether another holder's lease has expired, and (when its own fields are not to be
        believed) why: unchanged for `max_foreign_lease_s` of our own time, whatever they say."""
        most = self.settings.max_foreign_lease_s
        said = _whole(spec.get("leaseDurationSeconds"))
        duration = min(max(said, 0), most)
        meta = lease.get("metadata") if isinstance(lease.get("metadata"), dict) else {}
        record = meta.get("resourceVersion"), repr(spec)[:1000]
        if self._seen is None or self._seen[0] != record:
            self._seen = (record, self._monotonic())
        unchanged = self._monotonic() - self._seen[1]
        if renewed is None:
            return True, ""
        if renewed + duration < now:
            return True, f" (it says leaseDurationSeconds {said}; at most {most:g} s is honoured)" if said > most else ""
        if unchanged > most:
            return True, f" (it says a renewTime in the future, but has not changed for {unchanged:.0f} s)"
        return False, ""

    def try_acquire(self) -> tuple[bool, str | None, float | None, float]:
        """One attempt: (taken, the other holder or None when a write conflicted, when it
        renewed, now). `acquire` repeats it; a standby controller calls it each time it looks."""
        lease = self.client.read_lease(LEASE_NAME)
        now = self._clock()
        if lease is None:
            spec = self._held_spec(now, transitions=0)
            sent = self._monotonic()
            return self._write(self.client.create_lease(LEASE_NAME, spec), spec, sent), None, None, now
        spec = lease.get("spec") if isinstance(lease.get("spec"), dict) else {}
        holder = spec.get("holderIdentity") if isinstance(spec.get("holderIdentity"), str) else None
        renewed = _moment(spec.get("renewTime")) or _moment(spec.get("acquireTime"))
        expired, why = self._expired(lease, spec, renewed, now)
        if not holder or holder == self.identity or expired:
            transitions = _whole(spec.get("leaseTransitions")) + (0 if holder in (None, "", self.identity) else 1)
            new = self._held_spec(now, transitions)
            sent = self._monotonic()
            if self._write(self.client.replace_lease(LEASE_NAME, new, _version_of(lease, self.where)), new, sent):
                if holder and holder != self.identity:
                    log.warning("took over %s from %s, whose lease had expired%s", self.where, holder, why)
                return True, None, None, now
            return False, None, None, now  # 409: another planner wrote first
        return False, holder, renewed, now

    def _held_spec(self, now: float, transitions: int) -> dict:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.settings.lease_duration_s)),
                "acquireTime": stamp(now), "renewTime": stamp(now), "leaseTransitions": transitions}

    def _write(self, answer: dict | None, spec: dict, sent: float) -> bool:
        if answer is None:
            return False
        with self._lock:
            self._version, self._spec, self.lost = _version_of(answer, self.where), spec, None
            self.renewed_at = sent
        return True

    def renew(self) -> None:
        """Write a new renewTime; a conflict means another planner took the lease over. No lock
        is held while the request is out, so the fence (`check`) never waits for a slow answer.
        Its retries last what is left of the lease, at least a third of it (client-go's
        RenewDeadline): past that the fence stops every write anyway."""
        with self._lock:
            spec, version, last = {**self._spec, "renewTime": stamp(self._clock())}, self._version, self.renewed_at
        sent = self._monotonic()
        duration = self.settings.lease_duration_s
        left = duration if last is None else last + duration - sent
        answer = self.client.replace_lease(LEASE_NAME, spec, version, deadline_s=max(left, duration / 3))
        with self._lock:
            if self._version != version:  # taken again meanwhile (a standby that was this replica): not this answer's
                return
            if answer is None:
                self.lost = self.lost or "another planner wrote it"
            elif not self.lost:  # lost meanwhile (fenced, released): a late answer does not win it back
                self._version, self._spec = _version_of(answer, self.where), spec
                self.renewed_at = sent

    def lose(self, why: str) -> None:
        """Act no more: `why` the lease is no longer ours (the first reason stays)."""
        with self._lock:
            self.lost = self.lost or why

    def release(self) -> None:
        """Clear the holder, so the next planner need not wait for the lease to expire."""
        if self.lost:
            return
        with self._lock:
            spec = {**self._spec, "holderIdentity": None, "renewTime": stamp(self._clock())}
            if self.client.replace_lease(LEASE_NAME, spec, self._version) is None:
                log.warning("could not release %s: another planner took it over", self.where)
            self.lost, self.renewed_at = "released", None


class Renewer:
    """Renews a held lease every third of its duration, counted from the last renewal sent, from
    a thread of its own, on the lease's clocks (`Clocks.wait`). A round that plans 5,000 nodes,
    releases thousands of pods against a slow API server or waits on a PodDisruptionBudget does
    not hold it up, and the fence (`PlanningLease.check`) still guards every write. A failed
    renewal (another holder wrote the Lease, the API server did not answer within its retries)
    loses the lease and ends the thread; `close()` ends it too."""

    def __init__(self, lease: PlanningLease):
        self.lease = lease
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="gpu-policy-lease", daemon=True)
        self.thread.start()

    def close(self, wait: bool = True) -> None:
        """Renew no more; with `wait`, return once a renewal in flight has been answered."""
        self.stop.set()
        if wait and self.thread is not threading.current_thread():
            self.thread.join()

    def _run(self) -> None:
        lease = self.lease
        every = lease.settings.lease_duration_s / 3
        while not lease.lost:
            sent = lease.renewed_at
            if sent is None or lease.clocks.wait(self.stop, max(0.0, every - (lease.clocks.monotonic() - sent))):
                return
            try:
                lease.renew()
            except GpuPolicyError as e:  # the API server did not answer within the retries: act no more
                lease.lose(str(e))
        if lease.lost:
            log.warning("%s: lost (%s)", lease.where, lease.lost)
