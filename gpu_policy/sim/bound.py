"""An upper bound on the allocation ratio any policy can reach on a pod stream.

Two things cap what can be placed (the proof is in docs/simulate.md, "The bound"):

- **GPU models.** Pods that may use only the models of a set M ("confined" to M) fit
  only on M's GPUs; every other pod counts at most its own request.
- **Gaps beside big shares.** A GPU holding a share larger than half a GPU holds no
  other such share, and its gap (1000 minus the share) takes only pods no larger than
  the gap. For a gap size g, every confined share of at least 1000 - g that is placed
  leaves its gap, which only shares of at most g can fill; every one dropped loses its
  whole request. Dropping the smallest first is the best a placement can do.

So for every model set M and gap size g, with D_out the requests of pods not confined
to M, D_in those confined, C(M) the capacity of M, `small` the shares of at most g that
may use M, and k the big confined shares dropped:

    allocated <= D_out + max over k of min(D_in - dropped_k, C(M) - gaps_kept_k + small)

and the bound is the least over M and g. M = all models is the bound without models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_policy.packing.fragmentation import MILLI
from gpu_policy.packing.price import model_cuts

HALF = MILLI // 2


@dataclass(frozen=True)
class Arrivals:
    """Arriving pods grouped by kind: per group the GPU thousandths one pod asks for,
    its share of one GPU (0 unless it asks for part of one), the GPU models it may use
    (None: any) and how many arrived."""
    asked: np.ndarray
    share: np.ndarray
    models: list[frozenset[str] | None]
    count: np.ndarray


def allocation_bound(arrivals: Arrivals, capacity: dict[str, int]) -> float:
    """The largest allocation ratio any placement could reach: `capacity` is the GPU
    thousandths of each model."""
    total = sum(capacity.values())
    known = frozenset(capacity)
    allowed = [known if m is None else m & known for m in arrivals.models]
    best = float("inf")
    for cut in model_cuts(allowed, known):
        inside = np.array([a <= cut for a in allowed], dtype=bool)
        may_use = np.array([bool(a & cut) for a in allowed], dtype=bool)
        outside = float((arrivals.asked * arrivals.count)[~inside].sum())
        best = min(best, outside + _most_placed(arrivals, inside, may_use, sum(capacity[m] for m in cut)))
    return min(1.0, best / total)


def _most_placed(arrivals: Arrivals, inside: np.ndarray, may_use: np.ndarray, capacity: int) -> float:
    """The most GPU thousandths the pods confined to a model set can hold on its
    `capacity`, by the gap argument (inside: confined; may_use: may go there)."""
    asked = float((arrivals.asked * arrivals.count)[inside].sum())
    most = min(asked, capacity)
    big_groups = inside & (arrivals.share > HALF)
    sizes = np.sort(np.repeat(arrivals.share[big_groups], arrivals.count[big_groups]))
    for gap in sorted({MILLI - int(s) for s in arrivals.share[big_groups]}):
        big = sizes[sizes >= MILLI - gap]
        fillers = may_use & (arrivals.share > 0) & (arrivals.share <= gap)
        small = float((arrivals.share * arrivals.count)[fillers].sum())
        dropped = np.concatenate([[0], np.cumsum(big)])                           # smallest k dropped
        kept_gaps = np.concatenate([[0], np.cumsum((MILLI - big)[::-1])])[::-1]   # gaps of the rest
        most = min(most, float(np.minimum(asked - dropped, capacity - kept_gaps + small).max()))
    return most

