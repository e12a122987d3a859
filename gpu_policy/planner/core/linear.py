"""Linear expressions for the program's rows: `affine` writes one, `most` bounds one, and
`common_step` finds the step their values move by. Imports nothing of the planner, so every
rule module may use it."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pulp


def affine(terms: dict, constant: float = 0.0) -> pulp.LpAffineExpression:
    """A linear expression from {variable: coefficient}: much faster than lpSum."""
    return pulp.LpAffineExpression([(v, c) for v, c in terms.items() if c], constant)


def most(terms: dict) -> float:
    """The largest value sum |coefficient| * variable can take (every variable is bounded)."""
    return sum(abs(a) * max(abs(v.lowBound or 0), abs(v.upBound)) for v, a in terms.items())


def common_step(values: Iterable[float]) -> float | None:
    """The largest d of which every value is a whole multiple (values on a common denominator
    up to 1,000: GPUs in halves, MIG sevenths, ...), so sums of them differ by multiples of d;
    None if there is none (or no value but 0)."""
    values = {abs(a) for a in values if a}
    if not values:
        return None
    for denominator in range(1, 1001):
        if all(abs(a * denominator - round(a * denominator)) <= 1e-9 * max(1.0, a * denominator) for a in values):
            return math.gcd(*(round(a * denominator) for a in values)) / denominator
    return None
