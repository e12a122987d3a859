"""Garbage collection tuned for planning, called once where a process starts (the CLI, the
controller's loop).

A plan of 5,000 nodes allocates millions of objects (rows, variables, placements) that all
live until the Plan is written, so CPython's young-generation collections (every 700
allocations) scan them again and again and free nothing: 436 collections and 0.68 s of a
4 s plan (CPU, bench/plan_scale.py --nodes 5000). Objects alive when the process starts
(modules, the argument parser) are frozen, never scanned, and young collections run every
50,000 allocations: 5 collections and 0.07 s. Cycles are still collected.
"""

from __future__ import annotations

import gc

#: Allocations between young-generation collections (CPython's default is 700).
YOUNG_GENERATION = 50_000

_tuned = False


def tune_gc() -> None:
    """Freeze what is alive now and collect the young generation less often; once per process."""
    global _tuned
    if _tuned:
        return
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION, *gc.get_threshold()[1:])
    _tuned = True
