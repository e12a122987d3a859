"""PreemptionGuard: turn SIGTERM and SIGINT into a flag the training loop checks.

Kubernetes sends SIGTERM when it evicts a pod and SIGKILL after the pod's
``terminationGracePeriodSeconds`` (30 s by default). Inside the guard the first
signal sets `should_stop` and starts the deadline; the loop saves a checkpoint
and returns before it.
"""

from __future__ import annotations

import math
import os
import signal
import time
from types import FrameType

from gpu_policy.errors import UsageError

#: Set this in the pod to its terminationGracePeriodSeconds (the KFP and Airflow
#: integrations do it); `PreemptionGuard()` reads it when no grace period is given.
GRACE_ENV = "GPU_POLICY_TERMINATION_GRACE_S"
DEFAULT_GRACE_S = 30.0


def _grace_from_environment() -> float:
    text = os.environ.get(GRACE_ENV)
    if text is None:
        return DEFAULT_GRACE_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"${GRACE_ENV}: must be a finite number of seconds > 0, got {text[:40]!r}")
    return value


class PreemptionGuard:
    """A context manager that installs signal handlers and restores the old ones on exit."""

    def __init__(self, grace_period_s: float | None = None,
                 signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT), clock=time.monotonic):
        if grace_period_s is None:
            grace_period_s = _grace_from_environment()
        if not math.isfinite(grace_period_s) or grace_period_s <= 0:
            raise UsageError(f"grace_period_s: must be a finite number > 0, got {grace_period_s!r}")
        self.grace_period_s = grace_period_s
        self.signals = signals
        self._clock = clock
        self._previous: dict[int, object] = {}
        self.signal: int | None = None
        """The signal received, or None."""
        self.deadline: float | None = None
        """When the grace period ends, on the guard's clock; None until a signal."""

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

    @property
    def should_stop(self) -> bool:
        return self.signal is not None

    def remaining(self) -> float | None:
        """Seconds left before the grace period ends; None before any signal."""
        return None if self.deadline is None else self.deadline - self._clock()

    def trigger(self, signum: int = signal.SIGTERM) -> None:
        """Act as if `signum` arrived (for tests and for callers that learn of preemption otherwise)."""
        self._handle(signum, None)
