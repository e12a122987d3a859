"""When to checkpoint: Young/Daly's optimal interval from the cost of a save.

With a save taking ``delta`` seconds and preemptions arriving on average every
``M`` seconds, Young's first-order optimum is ``sqrt(2 * delta * M)``; Daly's
higher-order form (used here) corrects it for saves that are not small against
``M``, and is ``M`` itself once ``delta >= 2M``. Work on borrowed GPUs is at
higher risk of preemption: give it a smaller ``M``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


def young_interval(save_s: float, mean_time_to_preemption_s: float) -> float:
    return math.sqrt(2.0 * save_s * mean_time_to_preemption_s)


def daly_interval(save_s: float, mean_time_to_preemption_s: float) -> float:
    """Daly (2006): the compute time between checkpoints that minimises expected loss."""
    delta, m = save_s, mean_time_to_preemption_s
    if delta <= 0:
        return 0.0
    if delta >= 2.0 * m:
        return m
    r = delta / (2.0 * m)
    return math.sqrt(2.0 * delta * m) * (1.0 + math.sqrt(r) / 3.0 + r / 9.0) - delta


@dataclass
class CheckpointPolicy:
    """Says when a checkpoint is due; learns the save time from the saves it sees."""

    mean_time_to_preemption_s: float = 3600.0
    """Expected seconds between preemptions (an input now; later the planner's
    preemption risk for the job)."""

    save_seconds: float = 1.0
    """Seconds one save takes; replaced by the measured time after each save."""

    interval_s: float | None = None
    """A fixed interval in seconds, overriding Young/Daly (0: after every step)."""

    last_save: float | None = field(default=None)

    def __post_init__(self) -> None:
        if self.mean_time_to_preemption_s <= 0:
            raise ValueError(f"mean_time_to_preemption_s: must be > 0, got {self.mean_time_to_preemption_s!r}")
        if self.interval_s is not None and self.interval_s < 0:
            raise ValueError(f"interval_s: must be >= 0, got {self.interval_s!r}")

    @property
    def interval(self) -> float:
        if self.interval_s is not None:
            return self.interval_s
        return daly_interval(self.save_seconds, self.mean_time_to_preemption_s)

    def start(self, now: float) -> None:
        """Count the interval from `now` (the start of training, or a resume)."""
        self.last_save = now

    def due(self, now: float) -> bool:
        return self.last_save is None or now - self.last_save >= self.interval

    def record_save(self, seconds: float, now: float) -> None:
        self.save_seconds = seconds
        self.last_save = now
