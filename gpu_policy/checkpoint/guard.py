"""PreemptionGuard: a preemption signal, or gpu-policy's request to checkpoint, as flags the
training loop checks at its step boundaries.

Kubernetes sends SIGTERM when it evicts a pod and SIGKILL after the grace period
(``terminationGracePeriodSeconds``, 30 s by default). Inside the guard the first signal sets
`should_stop` and starts the deadline; the loop saves a checkpoint and returns before it.

Before it evicts a trainer that saves on request, gpu-policy asks it to (docs/checkpointing.md):
the annotation ``gpu-policy.io/checkpoint-requested`` on its pod, which the guard reads from the
downward-API file ``$GPU_POLICY_POD_INFO`` (a stat per look; read only when it changed). The
loop then saves, the guard writes ``gpu-policy.io/last-checkpoint`` and
``gpu-policy.io/checkpoint-save-s`` on the pod, and `pause` trains nothing until a signal
arrives or the request is withdrawn.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import time
from datetime import datetime, timezone
from types import FrameType
from typing import Callable, Protocol

from gpu_policy.checkpoint.pod_info import PodInfoFile
from gpu_policy.errors import UsageError
from gpu_policy.model.checkpointing import (CHECKPOINT_REQUESTED, DEFAULT_POD_INFO, GRACE_ENV, POD_GRACE_S,
                                            POD_INFO_ENV, parse_rfc3339)

log = logging.getLogger(__name__)
#: seconds between looks at the annotations file while paused (the kubelet refreshes it
#: within its sync period, about a minute: a second adds nothing to that and costs a stat)
DEFAULT_POLL_S = 1.0


class PodNotes(Protocol):
    """Where the trainer tells gpu-policy about its checkpoints: its own pod's annotations
    (`gpu_policy.kubernetes.write.own_pod.OwnPod`; best effort, never failing training)."""

    def note_checkpoint(self, step: int, seconds: float | None, at: datetime | None = None) -> None: ...


def _grace_from_environment() -> float:
    text = os.environ.get(GRACE_ENV)
    if text is None:
        return float(POD_GRACE_S)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"${GRACE_ENV}: must be a finite number of seconds > 0, got {text[:40]!r}")
    return value


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _own_pod() -> PodNotes:
    from gpu_policy.kubernetes.write.own_pod import OwnPod  # the trainer's side writes through the actuator

    return OwnPod.here()


class PreemptionGuard:
    """A context manager that installs signal handlers (restoring the old ones on exit) and
    watches the pod's annotations file for checkpoint requests.

    `pod_info` is that file (default ``$GPU_POLICY_POD_INFO``, else /etc/gpu-policy/pod/annotations;
    absent: no request ever), `pod` where checkpoints are noted (default: this process's own
    pod, which outside a cluster notes nothing). `clock` times the grace period, `now` stamps
    the notes, `sleep` waits between looks while paused (every `poll_s` seconds). With `chain`,
    a signal is also passed to the handler installed before (a framework's own, e.g. Lightning's).
    """

    def __init__(self, grace_period_s: float | None = None,
                 signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT), clock=time.monotonic, *,
                 pod_info: str | None = None, pod: PodNotes | None = None, now: Callable[[], datetime] = _utc_now,
                 sleep: Callable[[float], None] = time.sleep, poll_s: float = DEFAULT_POLL_S, chain: bool = False):
        if grace_period_s is None:
            grace_period_s = _grace_from_environment()
        if not math.isfinite(grace_period_s) or grace_period_s <= 0:
            raise UsageError(f"grace_period_s: must be a finite number > 0, got {grace_period_s!r}")
        if not math.isfinite(poll_s) or poll_s <= 0:
            raise UsageError(f"poll_s: must be a finite number > 0, got {poll_s!r}")
        self.grace_period_s = grace_period_s
        self.signals = signals
        self.pod_info = PodInfoFile(pod_info or os.environ.get(POD_INFO_ENV) or DEFAULT_POD_INFO)
        self.poll_s, self.chain = poll_s, chain
        self._clock, self._now, self._sleep = clock, now, sleep
        self._pod = pod
        self._previous: dict[int, object] = {}
        self.signal: int | None = None
        """The signal received, or None."""
        self.deadline: float | None = None
        """When the grace period ends, on the guard's clock; None until a signal."""
        self.answered: datetime | None = None
        """The newest checkpoint request answered (its time), or None."""
        self.requests_answered = 0
        self.seconds_paused = 0.0
        self._warned: str | None = None

    def __enter__(self) -> PreemptionGuard:
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is None:
            self.signal = signum
            self.deadline = self._clock() + self.grace_period_s
        previous = self._previous.get(signum)
        if self.chain and callable(previous):
            previous(signum, frame)

    @property
    def should_stop(self) -> bool:
        return self.signal is not None

    def remaining(self) -> float | None:
        """Seconds left before the grace period ends; None before any signal."""
        return None if self.deadline is None else self.deadline - self._clock()

    def trigger(self, signum: int = signal.SIGTERM) -> None:
        """Act as if `signum` arrived (for tests and for callers that learn of preemption otherwise)."""
        self._handle(signum, None)

    # -- checkpoint requests ---------------------------------------------------------------

    def request(self) -> datetime | None:
        """The standing checkpoint request's time (answered or not), or None. A value that is
        no RFC 3339 time counts as none (one warning)."""
        text = self.pod_info.annotations().get(CHECKPOINT_REQUESTED)
        if text is None:
            return None
        try:
            return parse_rfc3339(text)
        except ValueError:
            if self._warned != text:
                self._warned = text
                log.warning("%s: %s: must be an RFC 3339 time, got %r; taken as no checkpoint request",
                            self.pod_info.path, CHECKPOINT_REQUESTED, text[:40])
            return None

    def asked(self) -> bool:
        """Whether a request stands that this trainer has not answered: save, then `saved()`."""
        return self._unanswered(self.request())

    def _unanswered(self, request: datetime | None) -> bool:
        return request is not None and (self.answered is None or request > self.answered)

    def saved(self, step: int, seconds: float | None, note: bool = True) -> None:
        """Note on the pod that the state after `step` is saved (`seconds`: how long the save
        took; None when nothing new needed saving). This answers a standing request: the note's
        time is then at or after it, and the request is not answered again. `note=False`: the
        answer is recorded but another process of the pod writes the note."""
        at, request = self._now(), self.request()
        if self._unanswered(request):
            at, self.answered = max(at, request), request
            self.requests_answered += 1
            log.info("checkpoint of step %d answers the request of %s; training pauses until it is withdrawn "
                     "or the pod stops", step, request.isoformat())
        if note:
            if self._pod is None:
                self._pod = _own_pod()
            self._pod.note_checkpoint(step, seconds, at)

    def pause(self) -> None:
        """While an answered request stands, train nothing: wait (every `poll_s` seconds) until
        a signal arrives, the request is withdrawn, or a newer one needs an answer."""
        began, request = self._clock(), self.request()
        while not self.should_stop and request is not None and not self._unanswered(request):
            self._sleep(self.poll_s)
            request = self.request()
        waited = self._clock() - began
        self.seconds_paused += waited
        if waited > 0 and request is None and not self.should_stop:
            log.info("the checkpoint request was withdrawn after %.0f s; training goes on", waited)
