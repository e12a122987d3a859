"""Linear expressions for the program's rows: `affine` writes one, `most` bounds one.
Imports nothing of the planner, so every rule module may use it."""

from __future__ import annotations

import pulp


def affine(terms: dict, constant: float = 0.0) -> pulp.LpAffineExpression:
    """A linear expression from {variable: coefficient}: much faster than lpSum."""
    return pulp.LpAffineExpression([(v, c) for v, c in terms.items() if c], constant)


def most(terms: dict) -> float:
    """The largest value sum |coefficient| * variable can take (every variable is bounded)."""
    return sum(abs(a) * max(abs(v.lowBound or 0), abs(v.upBound)) for v, a in terms.items())
