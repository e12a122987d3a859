"""Each team's past GPU usage in a run, with exact exponential decay: what gpu-policy's
scenario carries as `usage_gpu_h`, and what `kai-time` reads as KAI's normalised usage.
The decay is the model's (`gpu_policy.model.usage.decay_factor`, what the controller keeps);
this history keeps the whole step function rather than a running sum, because KAI's sliding
window needs the sum as it was a week ago, and it counts usage without a half-life too (KAI's
default: nothing decays).

The GPUs a team holds (running or leaving jobs) change only at events, so usage is an
integral of a step function: between two changes, GPUs `a` held for `dt` seconds add
`a * h / ln 2 * (1 - 0.5^(dt / h))` GPU-seconds to a sum that decays by `0.5^(dt / h)`
(`h` the half-life; without one, nothing decays and `a * dt` is added). `E(t)`, the decayed
GPU-seconds held from the run's start to `t`, is kept at every change; a sliding window
`[t - W, t]` is `E(t) - 0.5^(W / h) E(t - W)`, exact as well.
"""

from __future__ import annotations

import bisect

import numpy as np

from gpu_policy.model.usage import SECONDS_PER_HOUR, decay_factor, decayed_gpu_h


class UsageHistory:
    """The GPUs each team held over a run, from `start_s` on, decayed with `half_life_s`
    (None: no decay)."""

    def __init__(self, teams: list[str], half_life_s: float | None, start_s: float):
        self.teams = list(teams)
        self.half_life_s = half_life_s
        self.start_s = start_s
        self._index = {team: i for i, team in enumerate(self.teams)}
        self._times = [start_s]                     # when the GPUs held changed
        self._sums = [np.zeros(len(self.teams))]    # E at each change, GPU-seconds
        self._held = [np.zeros(len(self.teams))]    # GPUs held from each change on

    def decay(self, dt: float) -> float:
        """What a GPU-second is worth `dt` seconds later."""
        return decay_factor(dt, self.half_life_s)

    def weight(self, dt: float) -> float:
        """Decayed GPU-seconds of one GPU held for the last `dt` seconds: the integral of
        `decay` over them, h / ln 2 (1 - decay(dt))."""
        return decayed_gpu_h(dt, self.half_life_s) * SECONDS_PER_HOUR

    def changed(self, t: float, team: str, delta: int) -> None:
        """From `t` on, `team` holds `delta` GPUs more (fewer, when negative)."""
        if t > self._times[-1]:
            self._sums.append(self._sum_at(t, len(self._times) - 1))
            self._held.append(self._held[-1].copy())
            self._times.append(t)
        self._held[-1][self._index[team]] += delta

    def _sum_at(self, t: float, k: int) -> np.ndarray:
        """E(t), from the change `k` (at or before `t`) on."""
        dt = t - self._times[k]
        return self._sums[k] * self.decay(dt) + self._held[k] * self.weight(dt)

    def sums(self, t: float) -> np.ndarray:
        """E(t): each team's decayed GPU-seconds from the run's start to `t`."""
        if t <= self.start_s:
            return np.zeros(len(self.teams))
        return self._sum_at(t, bisect.bisect_right(self._times, t) - 1)

    def gpu_hours(self, t: float) -> dict[str, float]:
        """Each team's decayed GPU-hours at `t`: gpu-policy's `usage_gpu_h`."""
        return dict(zip(self.teams, (float(x) for x in self.sums(t) / 3600)))

    def window_fractions(self, t: float, window_s: float, capacity: int) -> dict[str, float]:
        """Each team's decayed GPU-seconds over the window `[t - window_s, t]` (from the
        run's start at most) over those of `capacity` GPUs over the same window: KAI's usage,
        a part of the cluster in [0, 1]. All 0 at the start."""
        span = min(window_s, t - self.start_s)
        if span <= 0:
            return dict.fromkeys(self.teams, 0.0)
        held = self.sums(t) - self.decay(window_s) * self.sums(t - window_s)
        whole = capacity * self.weight(span)
        return dict(zip(self.teams, (float(x) for x in held / whole)))
