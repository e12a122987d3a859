"""Events on pods (events.k8s.io/v1): why a pod waits, starts or stops (spec "Events").

The actuator (gpu_policy.kubernetes.write.actuator) writes them on victims, released and
waiting pods; the controller also on a released pod not bound in time.

The short code of a reason is the planner's (gpu_policy.planner.codes): it is the `reason`
label in the metrics and the key that tells a changed wait reason from a repeat.
A waiting pod gets a new `GpuPolicyWaiting` Event only when its code changes; a repeat
updates that Event's series (count, last time), at most once per `series_every_s`.
Writes are best effort: a failure is counted (`failed`), never raised.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from gpu_policy.errors import ClusterUnavailable
from gpu_policy.kubernetes.clocks import stamp
from gpu_policy.kubernetes.transport.client import Answer, KubeClient
from gpu_policy.kubernetes.read.pods import PodRef
from gpu_policy.kubernetes.write.inflight import InFlight

#: who writes gpu-policy's Events (the contract's `reportingController`; a pipeline step reads its own by it)
CONTROLLER = "gpu-policy.io/controller"
NOTE_LIMIT = 1024  # bytes: the API server refuses longer notes

#: the codes no amount of waiting gets a pod past: a Warning (`GpuPolicyNotAdmitted`), not `GpuPolicyWaiting`
NOT_ADMITTED = frozenset({"NoNodeFits", "NoNodeMatches", "NotAllowedInQueue", "NotManaged", "UnreadablePod"})


def _note(text: str) -> str:
    data = text.encode()
    return text if len(data) <= NOTE_LIMIT else data[:NOTE_LIMIT - 3].decode(errors="ignore") + "..."


@dataclass
class _Write:
    """One Event write: its pod, the request, and what `_waiting` keeps of it once sent (None:
    nothing; `always`: kept whether or not the write succeeded, as a series update is)."""

    pod: PodRef
    send: Callable[[], Answer]
    name: str
    keep: tuple[str, str, int, float] | None = None
    always: bool = False


class EventWriter:
    """Writes gpu-policy's Events as `instance`; `check` runs before every write (fencing).
    One Event at a time (`write`, `waiting`), or many side by side through an `InFlight`
    (`write_many`, `waiting_many`), each fenced, the bookkeeping on the caller's thread."""

    def __init__(self, client: KubeClient, instance: str, clock: Callable[[], float], check: Callable[[], None],
                 series_every_s: float = 60.0, on_failure: Callable[[], None] = lambda: None):
        self.client, self.instance, self._clock, self.check = client, instance, clock, check
        self.series_every_s, self.on_failure = series_every_s, on_failure
        self.failed = 0
        self.written = 0
        self._waiting: dict[str, tuple[str, str, int, float]] = {}  # pod uid -> (code, event name, count, written at)

    def waiting(self, pod: PodRef, code: str, note: str, kind: str = "Normal",
                reason: str = "GpuPolicyWaiting") -> None:
        """Say why the pod waits: a new Event when the code changed, else its series grows."""
        self.waiting_many([(pod, code, note, kind, reason)], _ONE_AT_A_TIME)

    def waiting_many(self, told: list[tuple[PodRef, str, str, str, str]], in_flight: InFlight) -> None:
        """`waiting` for each (pod, code, note, kind, reason), the writes side by side."""
        now, writes = self._clock(), []
        for pod, code, note, kind, reason in told:
            last = self._waiting.get(pod.uid)
            if last is None or last[0] != code:
                write = self._new(pod, reason, f"{code}: {note}", kind, "Wait", now)
                write.keep = (code, write.name, 1, now)
                writes.append(write)
                continue
            _, name, count, written = last
            if now - written >= self.series_every_s:
                writes.append(_Write(pod, self._series(pod, name, count + 1, now), name, (code, name, count + 1, now),
                                     always=True))
        self._send_all(writes, in_flight)

    def forget(self, uid: str) -> None:
        """The pod no longer waits (released or gone)."""
        self._waiting.pop(uid, None)

    def keep_only(self, uids: set[str]) -> None:
        """Forget the pods that no longer wait (released, or deleted while gated)."""
        for uid in set(self._waiting) - uids:
            del self._waiting[uid]

    def write(self, pod: PodRef, reason: str, note: str, kind: str = "Normal", action: str = "Admit") -> str | None:
        """One new Event on the pod; its name, or None when the write failed."""
        return self.write_many([(pod, reason, note, kind, action)], _ONE_AT_A_TIME)[0]

    def write_many(self, events: list[tuple[PodRef, str, str, str, str]], in_flight: InFlight) -> list[str | None]:
        """A new Event for each (pod, reason, note, kind, action), side by side; each one's name,
        or None where its write failed."""
        now = self._clock()
        writes = [self._new(pod, reason, note, kind, action, now) for pod, reason, note, kind, action in events]
        sent = self._send_all(writes, in_flight)
        return [w.name if id(w) in sent else None for w in writes]

    def _new(self, pod: PodRef, reason: str, note: str, kind: str, action: str, now: float) -> _Write:
        name = f"{pod.name}.{uuid.uuid4().hex[:16]}"[:253]
        body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": pod.namespace},
                "eventTime": stamp(now), "reportingController": CONTROLLER, "reportingInstance": self.instance[:128],
                "action": action, "reason": reason, "type": kind, "note": _note(note),
                "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name,
                              "uid": pod.uid}}
        return _Write(pod, lambda: self.client.create_event(pod.namespace, body), name)

    def _series(self, pod: PodRef, name: str, count: int, now: float) -> Callable[[], Answer]:
        return lambda: self.client.patch_event(pod.namespace, name, {
            "series": {"count": count, "lastObservedTime": stamp(now)}})

    def _send_all(self, writes: list[_Write], in_flight: InFlight) -> set[int]:
        """Send the writes (each fenced); count each as written or failed (an API server that stays
        down included) and keep what `_waiting` needs. The ids of the writes that succeeded."""
        sent: set[int] = set()

        def answered(write: _Write, ok: bool) -> None:
            if ok:
                self.written += 1
                sent.add(id(write))
            else:
                self.failed += 1
                self.on_failure()
            if write.keep is not None and (ok or write.always):
                self._waiting[write.pod.uid] = write.keep

        in_flight.send_each(writes, _attempt, answered, self.check)
        return sent


def _attempt(write: _Write) -> bool:
    """Whether the write succeeded; an API server that stays down is a failure like a refusal."""
    try:
        return write.send().status < 300
    except ClusterUnavailable:
        return False


#: the one-at-a-time writes (`write`, `waiting`) go out on the caller's thread
_ONE_AT_A_TIME = InFlight(1)
