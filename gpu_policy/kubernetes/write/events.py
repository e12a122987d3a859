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
from typing import Callable

from gpu_policy.errors import ClusterUnavailable
from gpu_policy.kubernetes.clocks import stamp
from gpu_policy.kubernetes.transport.client import Answer, KubeClient
from gpu_policy.kubernetes.read.pods import PodRef

#: who writes gpu-policy's Events (the contract's `reportingController`; a pipeline step reads its own by it)
CONTROLLER = "gpu-policy.io/controller"
NOTE_LIMIT = 1024  # bytes: the API server refuses longer notes

#: the codes no amount of waiting gets a pod past: a Warning (`GpuPolicyNotAdmitted`), not `GpuPolicyWaiting`
NOT_ADMITTED = frozenset({"NoNodeFits", "NoNodeMatches", "NotAllowedInQueue", "NotManaged", "UnreadablePod"})


def _note(text: str) -> str:
    data = text.encode()
    return text if len(data) <= NOTE_LIMIT else data[:NOTE_LIMIT - 3].decode(errors="ignore") + "..."


class EventWriter:
    """Writes gpu-policy's Events as `instance`; `check` runs before every write (fencing)."""

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
        now = self._clock()
        last = self._waiting.get(pod.uid)
        if last is not None and last[0] == code:
            _, name, count, written = last
            if now - written < self.series_every_s:
                return
            self.check()
            self._waiting[pod.uid] = (code, name, count + 1, now)
            self._send(lambda: self.client.patch_event(pod.namespace, name, {
                "series": {"count": count + 1, "lastObservedTime": stamp(now)}}))
            return
        name = self.write(pod, reason, f"{code}: {note}", kind, "Wait")
        if name:
            self._waiting[pod.uid] = (code, name, 1, now)

    def forget(self, uid: str) -> None:
        """The pod no longer waits (released or gone)."""
        self._waiting.pop(uid, None)

    def keep_only(self, uids: set[str]) -> None:
        """Forget the pods that no longer wait (released, or deleted while gated)."""
        for uid in set(self._waiting) - uids:
            del self._waiting[uid]

    def write(self, pod: PodRef, reason: str, note: str, kind: str = "Normal", action: str = "Admit") -> str | None:
        """One new Event on the pod; its name, or None when the write failed."""
        self.check()
        now = self._clock()
        name = f"{pod.name}.{uuid.uuid4().hex[:16]}"[:253]
        body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": pod.namespace},
                "eventTime": stamp(now), "reportingController": CONTROLLER, "reportingInstance": self.instance[:128],
                "action": action, "reason": reason, "type": kind, "note": _note(note),
                "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name,
                              "uid": pod.uid}}
        return name if self._send(lambda: self.client.create_event(pod.namespace, body)) else None

    def _send(self, write: Callable[[], Answer]) -> bool:
        """Send one write; count it as written or failed (an API server that stays down included)."""
        try:
            ok = write().status < 300
        except ClusterUnavailable:
            ok = False
        if ok:
            self.written += 1
        else:
            self.failed += 1
            self.on_failure()
        return ok
