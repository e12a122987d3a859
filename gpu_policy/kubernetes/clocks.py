"""The clocks a live cluster's reading and acting run on, injected once (tests pass fake ones)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Clocks:
    """`wall`: seconds since the epoch (expiry times, Events, what the API server sees);
    `monotonic`: intervals (fencing, eviction and retry deadlines); `sleep`: waits between retries."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
