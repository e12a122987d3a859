"""The clocks a live cluster's reading and acting run on, injected once (tests pass fake ones)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable


@dataclass(frozen=True)
class Clocks:
    """`wall`: seconds since the epoch (expiry times, Events, what the API server sees);
    `monotonic`: intervals (fencing, eviction and retry deadlines); `sleep`: waits between retries."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def stamp(t: float) -> str:
    """Seconds since the epoch as RFC 3339 in UTC, to the microsecond (the API server's MicroTime)."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
