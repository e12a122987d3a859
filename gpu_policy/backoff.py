"""Doubling waits between the attempts of one operation: the one backoff every retry loop uses
(the Kubernetes client's requests and evictions, the Prometheus queries, the controller's watches).

The clock, the sleep and the random draw are injected, so a test runs a loop on a fake clock
and asserts the waits exactly. The helper decides how long to wait and whether a deadline
allows it; what counts as a failure worth retrying stays with each loop.
"""

from __future__ import annotations

import math
import random
import time
from typing import Callable


class Backoff:
    """Waits of `first_s`, doubling after each, at most `ceiling_s`; each own wait multiplied by
    a random factor in [1 - jitter, 1 + jitter] (`draw` in [0, 1)), so that many clients refused
    at once do not come back at the same instant; no wait under `floor_s`. A wait the other side
    asked for (a `Retry-After`, already clamped) replaces the own one, which doubles all the same.
    `deadline_s`, counted from now on `monotonic`: no wait ends past it."""

    def __init__(self, first_s: float, *, ceiling_s: float = math.inf, jitter: float = 0.0, floor_s: float = 0.0,
                 deadline_s: float = math.inf, sleep: Callable[[float], object] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic, draw: Callable[[], float] = random.random):
        self.first_s, self.ceiling_s, self.jitter, self.floor_s = first_s, ceiling_s, jitter, floor_s
        self._sleep, self._monotonic, self._draw = sleep, monotonic, draw
        self.deadline = monotonic() + deadline_s
        self._next = first_s

    def wait_s(self, asked: float | None = None) -> float:
        """The next wait (`asked` when given, else the own backoff, jittered), and double the backoff."""
        own = self._next * (1 + self.jitter * (2 * self._draw() - 1)) if self.jitter and asked is None else self._next
        self._next = min(self._next * 2, self.ceiling_s)
        return max(asked if asked is not None else own, self.floor_s)

    def pause(self, asked: float | None = None) -> bool:
        """Sleep the next wait and say True; False, without sleeping, when it would end past the deadline."""
        wait = self.wait_s(asked)
        if self._monotonic() + wait > self.deadline:
            return False
        self._sleep(wait)
        return True

    def reset(self) -> None:
        """The operation succeeded: the next failure waits `first_s` again."""
        self._next = self.first_s
