"""Garbage collection tuned for planning, called once where a process starts (the CLI, the
controller's loop).

A plan of 5,000 nodes allocates millions of objects (rows, variables, placements) that all
live until the Plan is written, so CPython's young-generation collections (every 700
allocations) scan them again and again and free nothing: 436 collections and 0.68 s of a
4 s plan (CPU, bench/plan_scale.py --nodes 5000). Objects alive when the process starts
(modules, the argument parser) are frozen, never scanned, and young collections run every
200,000 allocations: none in a 5,000-node plan (every 50,000: 3 of 20-30 ms each, 5-8% of
the plan; docs/benchmarks.md). The older generations are collected less often
too: the controller keeps its cache (some 10^5 long-lived objects at 1,000 nodes / 4,200 pods)
for its whole life, and with Python's (700, 10, 10) a look and a plan spent half their CPU in
full collections walking it. Almost all garbage is freed by reference counting; cycles are
still collected, a little later.
"""

from __future__ import annotations

import gc

#: The collector's thresholds: allocations between young-generation collections (CPython's
#: default is 700), then young (middle) collections between middle (full) ones (default 10, 10).
THRESHOLDS = (200_000, 20, 100)

_tuned = False


def tune_gc() -> None:
    """Freeze what is alive now and collect the young generation less often; once per process."""
    global _tuned
    if _tuned:
        return
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    _tuned = True
