"""An upper bound on the allocation ratio any policy can reach on a pod stream.

A GPU that holds a share larger than half a GPU holds no other such share, and
its gap (1000 minus the share) can only take pods no larger than the gap. For a
gap size g, let the "big" pods be the shares of at least 1000 - g: every big pod
placed leaves its gap, which only pods of at most g can fill; every big pod
dropped loses its whole share. Dropping the smallest big pods first,

    unallocated >= min over k of max(dropped_k - overshoot, gaps_kept_k - small)

where `small` is all the arriving demand of pods of at most g and `overshoot` how
far the arrivals went past the target. The bound is the best over g.
"""

from __future__ import annotations

import numpy as np

from gpu_policy.packing.fragmentation import MILLI

HALF = MILLI // 2


def allocation_bound(share_sizes: list[int], capacity_milli: int, overshoot_milli: int) -> float:
    """The largest allocation ratio any placement could reach: `share_sizes` are the
    thousandths asked by every arriving pod of part of one GPU."""
    sizes = np.sort(np.asarray(share_sizes, dtype=np.int64))
    worst = 0.0
    for gap in sorted({MILLI - int(s) for s in sizes if s > HALF}):
        big = sizes[sizes >= MILLI - gap]
        small = int(sizes[sizes <= gap].sum())
        dropped = np.concatenate([[0], np.cumsum(big)])                  # smallest k dropped
        kept_gaps = np.concatenate([[0], np.cumsum((MILLI - big)[::-1])])[::-1]  # gaps of the rest
        unallocated = np.maximum(dropped - overshoot_milli, kept_gaps - small).min()
        worst = max(worst, float(unallocated))
    return 1.0 - worst / capacity_milli
