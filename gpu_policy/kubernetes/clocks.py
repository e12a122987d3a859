"""The clocks a live cluster's reading and acting run on, injected once (tests pass fake ones)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable


def wait_for(event: threading.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` have passed; whether it was set."""
    return event.wait(seconds)


@dataclass(frozen=True)
class Clocks:
    """`wall`: seconds since the epoch (expiry times, Events, what the API server sees);
    `monotonic`: intervals (fencing, eviction and retry deadlines); `sleep`: waits between retries;
    `wait`: a thread's wait for an event or a time on `monotonic`, whichever comes first (the
    Lease's renewals)."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wait: Callable[[threading.Event, float], bool] = wait_for


def stamp(t: float) -> str:
    """Seconds since the epoch as RFC 3339 in UTC, to the microsecond (the API server's MicroTime)."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
