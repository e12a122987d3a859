"""What one GPU holds: fractions share a GPU while their sizes sum to at most one. The one
place this is checked (placing running replicas, the program's bounds, realising a plan,
the greedy scope and the reasons all ask here)."""

from __future__ import annotations

import math

from gpu_policy.planner.rules.vocabulary import EPS


def fits_on_gpu(used: float, gpus: float) -> bool:
    """Whether a fraction of `gpus` fits beside the `used` part of one GPU."""
    return used + gpus <= 1 + EPS


def has_room(used: float) -> bool:
    """Whether a GPU holding the `used` part has any room left for a fraction."""
    return used < 1 - EPS


def per_gpu(gpus: float) -> int:
    """How many fractions of `gpus` one GPU holds."""
    return math.floor(1 / gpus + EPS)
