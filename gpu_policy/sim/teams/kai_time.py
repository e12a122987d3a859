"""`kai-time`: the `kai-like` scheduler with KAI-Scheduler's time-based fair share, modelled
from KAI's source (kai-scheduler/KAI-Scheduler at d5bc503a, v0.20.1; read, not copied):

- **Usage** (pkg/scheduler/cache/usagedb/prometheus/prometheus.go, `GetResourceUsage`,
  `querySlidingTimeWindow`, `getExponentialDecayQuery`; defaults in
  pkg/scheduler/cache/usagedb/api/defaults.go): each queue's allocated GPUs, each sample
  weighted by 0.5^(age / half-life), summed over a sliding window (default one week), over
  the cluster's GPU capacity summed the same way over the same window. So a queue's usage
  is the decayed part of the cluster it held lately, in [0, 1]. Without a half-life (KAI's
  default) nothing decays. Here the sums are exact integrals of what each team held
  (`usage.UsageHistory.window_fractions`), up to the round; KAI samples every minute and
  fetches every minute, which this leaves out.
- **Division** (pkg/scheduler/plugins/proportion/resource_division/resource_division.go,
  `setDeservedResource`, `divideUpToFairShare`, `calcShareWeights`,
  `getResourceToGiveInCurrentRound`, `divideRemainingResource`; the kValue argument and its
  default 1 in pkg/scheduler/plugins/proportion/proportion.go): each queue first gets
  min(deserved, request); the rest goes out in rounds among the queues still requesting
  more, each with the weight max(0, W + k (W - U)), W its over-quota weight over those of
  the queues still requesting (all weights are 1 here), U its usage and k the kValue
  (`--usage-weight`). In a round a queue gets its part of what was left when the round began,
  all it still requests if that is less, else the part rounded down to whole GPUs; rounds go
  on while some queue was satisfied. The fractions rounded away then go one GPU at a time to
  the queues that dropped the largest ones (ties: by name, where KAI looks at creation time).

Allocation, consolidation and reclaim are `kai-like`'s (`kai.py`), on these fair shares.
"""

from __future__ import annotations

import math

from gpu_policy.sim.teams.jobs import RoundView
from gpu_policy.sim.teams.kai import KaiLikePolicy

#: KAI's default usage window (`windowSize: 1w`, sliding).
WINDOW_S = 7 * 86_400.0


def kai_division(capacity: int, deserved: dict[str, int], request: dict[str, int], usage: dict[str, float],
                 k: float) -> dict[str, int]:
    """Each queue's whole-GPU fair share by KAI's division (the module's docstring), every
    over-quota weight 1; `usage` in parts of the cluster, `k` the kValue."""
    share = {q: min(deserved[q], request[q]) for q in deserved}
    left = capacity - sum(share.values())
    dropped: dict[str, float] = {}  # queues still short: the fraction their last round rounded away
    while left > 0:
        short = sorted(q for q in share if request[q] > share[q])
        parts = {q: max(0.0, 1 / len(short) + k * (1 / len(short) - usage[q])) for q in short}
        total = sum(parts.values())
        if total <= 0:
            break
        budget, again = left, False
        for q in short:
            part = budget * parts[q] / total
            wants = request[q] - share[q]
            given = wants if wants <= part else math.floor(part)
            if wants <= part:
                dropped.pop(q, None)
            elif part > given:
                dropped[q] = part - given
            share[q] += given
            left -= given
            again |= wants < part
        if not again:
            break
    for q in sorted(dropped, key=lambda q: (-dropped[q], q)):
        if left <= 0:
            break
        share[q] += 1
        left -= 1
    return share


class KaiTimePolicy(KaiLikePolicy):
    name = "kai-time"

    def fair_shares(self, view: RoundView, demand: dict[str, int]) -> dict[str, int]:
        """KAI's division with each team's usage over the last week (the module's docstring)."""
        usage = (view.usage.window_fractions(view.now, WINDOW_S, view.gpus) if view.usage is not None
                 else dict.fromkeys(view.quotas, 0.0))
        return kai_division(view.gpus, view.quotas, demand, usage, view.usage_weight)
