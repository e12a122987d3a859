"""One planner at a time: the Lease `gpu-policy-planner` (coordination.k8s.io/v1).

observe -> decide -> act runs while holding it. It is acquired with optimistic
concurrency (a write carries the resourceVersion read; 409 means another planner wrote
first), taken over only after ``renewTime + leaseDurationSeconds`` has passed, renewed
every third of its duration while the planner works, and released at the end by an
update that clears the holder (never deleted). A planner that dies holding it is
replaced once the lease expires.

Fencing (`fenced=True`, the controller's): `check()`, called before every write, also
fails once the last successful renewal is as old as the lease, counted from when that renewal request was SENT (the
API server may have stored it late, never early), so a planner whose renewals stall
stops acting before another can take the lease over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Callable, Iterator

from gpu_policy.errors import ClusterBusy, GpuPolicyError
from gpu_policy.kubernetes.client import KubeClient
from gpu_policy.kubernetes.names import LEASE_NAME

log = logging.getLogger(__name__)


def new_identity() -> str:
    """Who holds the lease: host, process and a random suffix (two planners never share one)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _moment(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class PlanningLease:
    """The planning lease of one planner (`identity`). Use `held()` as a context manager."""

    def __init__(self, client: KubeClient, identity: str, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 fenced: bool = False):
        self.client = client
        self.fenced = fenced
        self.identity = identity
        self.settings = client.settings
        self._clock, self._sleep, self._monotonic = clock, sleep, monotonic
        self._version: str | None = None  # the resourceVersion of our last write
        self._spec: dict = {}
        self.lost: str | None = None  # why we no longer hold it, once that happens
        self.renewed_at: float | None = None  # monotonic time the last successful write was sent
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"Lease {self.settings.namespace}/{LEASE_NAME}"

    @contextmanager
    def held(self) -> Iterator[PlanningLease]:
        """Hold the lease for the block, renewing it in the background; release it after."""
        self.acquire()
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew_until, args=(stop,), name="gpu-policy-lease", daemon=True)
        renewer.start()
        try:
            yield self
        finally:
            stop.set()
            renewer.join()
            self.release()

    def check(self) -> None:
        """Raise ClusterBusy when the lease was lost (another planner took it over, or the
        last successful renewal is as old as the lease): act no more."""
        duration = self.settings.lease_duration_s
        stale = self.renewed_at is None or self._monotonic() - self.renewed_at >= duration
        if self.fenced and not self.lost and stale:
            self.lost = f"no successful renewal within its {duration:g} s"
        if self.lost:
            raise ClusterBusy(f"{self.client.where}: {self.where}: lost the planning lease ({self.lost}); "
                              "nothing more was done")

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
                age = f", renewed {now - renewed:.0f} s ago" if renewed else ""
                raise ClusterBusy(f"{self.client.where}: {self.where} is held by {holder}{age}; gave up after "
                                  f"waiting {s.lease_wait_s:g} s for it")
            self._sleep(s.lease_poll_s)

    def try_acquire(self) -> tuple[bool, str | None, float | None, float]:
        """One attempt: (taken, the other holder or None when a write conflicted, when it
        renewed, now). A standby controller calls it each time it looks."""
        lease = self.client.read_lease(LEASE_NAME)
        now = self._clock()
        if lease is None:
            spec = self._held_spec(now, transitions=0)
            return self._write(self._monotonic(), self.client.create_lease(LEASE_NAME, spec), spec), None, None, now
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _moment(spec.get("renewTime")) or _moment(spec.get("acquireTime"))
        expired = renewed is None or renewed + (spec.get("leaseDurationSeconds") or 0) < now
        if not holder or holder == self.identity or expired:
            transitions = (spec.get("leaseTransitions") or 0) + (0 if holder in (None, "", self.identity) else 1)
            new = self._held_spec(now, transitions)
            sent = self._monotonic()
            if self._write(sent, self.client.replace_lease(LEASE_NAME, new, lease["metadata"]["resourceVersion"]), new):
                if holder and holder != self.identity:
                    log.warning("took over %s from %s, whose lease had expired", self.where, holder)
                return True, None, None, now
            return False, None, None, now  # 409: another planner wrote first
        return False, holder, renewed, now

    def _held_spec(self, now: float, transitions: int) -> dict:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.settings.lease_duration_s)),
                "acquireTime": _stamp(now), "renewTime": _stamp(now), "leaseTransitions": transitions}

    def _write(self, sent: float, answer: dict | None, spec: dict) -> bool:
        if answer is None:
            return False
        with self._lock:
            self._version, self._spec, self.lost = answer["metadata"]["resourceVersion"], spec, None
            self.renewed_at = sent
        return True

    def renew(self) -> None:
        """Write a new renewTime; a conflict means another planner took the lease over."""
        with self._lock:
            spec = {**self._spec, "renewTime": _stamp(self._clock())}
            sent = self._monotonic()
            answer = self.client.replace_lease(LEASE_NAME, spec, self._version)
            if answer is None:
                self.lost = "another planner wrote it"
            else:
                self._version, self._spec, self.renewed_at = answer["metadata"]["resourceVersion"], spec, sent

    def release(self) -> None:
        """Clear the holder, so the next planner need not wait for the lease to expire."""
        if self.lost:
            return
        with self._lock:
            spec = {**self._spec, "holderIdentity": None, "renewTime": _stamp(self._clock())}
            if self.client.replace_lease(LEASE_NAME, spec, self._version) is None:
                log.warning("could not release %s: another planner took it over", self.where)
            self.lost, self.renewed_at = "released", None

    def _renew_until(self, stop: threading.Event) -> None:
        while not stop.wait(self.settings.lease_duration_s / 3):
            try:
                self.renew()
            except GpuPolicyError as e:  # the API server is unreachable: say so, and stop acting
                self.lost = str(e)
            if self.lost:
                log.warning("%s: %s", self.where, self.lost)
                return
