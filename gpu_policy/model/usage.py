"""Usage history: each queue's GPU-hours, older hours decayed with a half-life (fair share over
time, docs/policy.md). A scenario carries its values as the queues' `usage_gpu_h`; on a live
cluster the leader keeps it (gpu_policy.controller.usage) and every look reads it
(gpu_policy.kubernetes.read.usage).

Pure: it is told what each queue held and for how long, and it decays exactly, not by steps.
A queue that held `g` GPUs for the `T` seconds since the last sample, and had `u` GPU-hours
then, has

    u' = u 2^(-T/h) + g (h / ln 2) (1 - 2^(-T/h)) / 3600

GPU-hours after them, `h` being the half-life: the integral over those `T` seconds of `g`,
each second weighed by `2^(-age/h)`. So two samples of `T` give what one of `2T` gives.
Departments are not kept: the planner adds their queues' usage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

SECONDS_PER_HOUR = 3600.0
#: GPU-hours below which a queue's entry is forgotten (decayed to nothing)
FORGOTTEN_GPU_H = 1e-6
_LN2 = math.log(2.0)


def decay_factor(seconds: float, half_life_s: float | None) -> float:
    """What one GPU-hour is worth `seconds` later: 1 with no half-life, or for no time."""
    if half_life_s is None or seconds <= 0:
        return 1.0
    return math.exp(-seconds * _LN2 / half_life_s)


def decayed_gpu_h(seconds: float, half_life_s: float | None) -> float:
    """Decayed GPU-hours of one GPU held for the last `seconds` (`math.inf`: all along): the
    integral of `decay_factor` over them, half-life / ln 2 (1 - decay); plain hours with no
    half-life."""
    if half_life_s is None:
        return seconds / SECONDS_PER_HOUR
    rate = _LN2 / half_life_s
    return -math.expm1(-seconds * rate) / rate / SECONDS_PER_HOUR


@dataclass
class UsageHistory:
    """Each queue's decayed GPU-hours (`gpu_h`), as they are at `at` (seconds since the epoch)."""

    at: float
    half_life_s: float | None = None
    """Seconds in which an hour of use loses half its weight. None: nothing decays, and nothing
    held is counted (usage does not count without a half-life)."""
    gpu_h: dict[str, float] = field(default_factory=dict)

    @classmethod
    def read_back(cls, entries: Mapping[str, tuple[float, float]], now: float,
                  half_life_s: float | None) -> UsageHistory:
        """The history at `now` of entries `queue -> (gpu_h, the time they were decayed to)`,
        each decayed from its own time (one later than `now` counts as now)."""
        history = cls(now, half_life_s)
        for queue, (gpu_h, at) in entries.items():
            value = gpu_h * decay_factor(now - at, half_life_s)
            if value >= FORGOTTEN_GPU_H:
                history.gpu_h[queue] = value
        return history

    def add(self, held: Mapping[str, float], seconds: float) -> None:
        """The queues held `held` GPUs for the `seconds` after `at`: count them, decay what was
        there, and move `at` on by `seconds` (nothing for no time or time gone backwards)."""
        if seconds <= 0:
            return
        self.at += seconds
        if self.half_life_s is None:
            return
        kept = decay_factor(seconds, self.half_life_s)
        gained = decayed_gpu_h(seconds, self.half_life_s)  # GPU-hours one GPU adds, decayed
        for queue in sorted(set(self.gpu_h) | {q for q, gpus in held.items() if gpus > 0}):
            value = self.gpu_h.get(queue, 0.0) * kept + max(0.0, held.get(queue, 0.0)) * gained
            if value >= FORGOTTEN_GPU_H:
                self.gpu_h[queue] = value
            else:
                self.gpu_h.pop(queue, None)

    def add_before(self, held: list[tuple[str, float, float]]) -> None:
        """Count (queue, GPUs, seconds) held during the `seconds` that ended at `at`."""
        if self.half_life_s is None:
            return
        for queue, gpus, seconds in held:
            self.gpu_h[queue] = self.gpu_h.get(queue, 0.0) + max(0.0, gpus) * decayed_gpu_h(seconds, self.half_life_s)

    def at_time(self, t: float) -> dict[str, float]:
        """Each queue's GPU-hours decayed to `t`, counting nothing held since `at`."""
        factor = decay_factor(t - self.at, self.half_life_s)
        return {queue: value * factor for queue, value in self.gpu_h.items()}
