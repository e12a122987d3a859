"""Each queue's fair share of the cluster's GPUs (docs/policy.md, "Fair share").

Every queue first gets ``min(deserved, demand)``. What capacity is left goes to
queues with unmet demand: higher ``priority`` tiers first; inside a tier by
water-filling in proportion to ``over_quota_weight``. Departments (``parent``)
are divided first, then their queues share the department's part. Shares are
whole GPUs: round down, then hand the leftover units to the largest remainders;
a share never falls below ``min(deserved, demand)`` rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpu_policy.model import EPS, Scenario
from gpu_policy.model.placement import refusals


@dataclass(frozen=True)
class QueueDemand:
    """GPUs a queue (or department) runs and waits for, capped by its limit."""

    running: float
    pending: float
    limit: float | None

    @property
    def total(self) -> float:
        want = self.running + self.pending
        return want if self.limit is None else min(want, self.limit)


def queue_demands(s: Scenario, refused: dict[str, str] | None = None) -> dict[str, QueueDemand]:
    """Demand of every queue, departments included (the sum of their queues). A waiting job
    its queue does not admit (`refused`: `placement.refusals(s)`, when the caller has them;
    its namespace may not use the queue) is no demand of that queue: it could never start
    there, so it earns the queue no share."""
    running: dict[str, float] = {q.name: 0.0 for q in s.queues}
    pending: dict[str, float] = {q.name: 0.0 for q in s.queues}
    refused = refusals(s) if refused is None else refused
    for job in s.jobs:
        if job.running:
            running[job.queue] += job.total_gpus
        elif job.name not in refused:
            pending[job.queue] += job.total_gpus
    out: dict[str, QueueDemand] = {}

    def visit(name: str) -> QueueDemand:
        if name in out:
            return out[name]
        kids = s.children(name)
        run, pend = running[name], pending[name]
        capped_kids = 0.0
        for kid in kids:
            d = visit(kid.name)
            run += d.running
            pend += d.pending
            capped_kids += d.total
        limit = s.queue(name).limit
        if kids:  # a department wants what its queues want, each capped by its own limit
            limit = capped_kids if limit is None else min(limit, capped_kids)
        out[name] = QueueDemand(run, pend, limit)
        return out[name]

    for q in s.queues:
        visit(q.name)
    return out


def fair_shares(s: Scenario, capacity: float | None = None,
                demands: dict[str, QueueDemand] | None = None) -> dict[str, int]:
    """Whole-GPU fair share of every queue and department, by name; `demands`:
    `queue_demands(s)`, when the caller has them (a pass over every job)."""
    demands = queue_demands(s) if demands is None else demands
    shares: dict[str, int] = {}
    total = s.gpus_schedulable if capacity is None else capacity

    def divide(parent: str | None, available: float) -> None:
        kids = s.children(parent)
        if not kids:
            return
        raw = split_capacity(
            available,
            [(k.deserved, demands[k.name].total, k.over_quota_weight, k.priority) for k in kids],
        )
        whole = round_largest_remainder(raw, available, [demands[k.name].total for k in kids])
        for kid, share in zip(kids, whole):
            # whole GPUs never below the guarantee: min(deserved, demand), rounded up
            shares[kid.name] = max(share, math.ceil(min(kid.deserved, demands[kid.name].total) - EPS))
            divide(kid.name, shares[kid.name])

    divide(None, total)
    return shares


def split_capacity(capacity: float, claims: list[tuple[float, float, float, int]]) -> list[float]:
    """Divide `capacity` among claims of (deserved, demand, weight, priority tier).

    Deserved first (never cut, even when guarantees exceed capacity), then the
    surplus tier by tier, water-filled by weight; nobody gets above its demand.
    """
    share = [min(deserved, demand) for deserved, demand, _, _ in claims]
    left = max(0.0, capacity - sum(share))
    for tier in sorted({c[3] for c in claims}, reverse=True):
        members = [i for i, c in enumerate(claims) if c[3] == tier and c[2] > 0]
        while left > EPS:
            hungry = [i for i in members if claims[i][1] - share[i] > EPS]
            if not hungry:
                break
            weight = sum(claims[i][2] for i in hungry)
            full = [i for i in hungry if claims[i][1] - share[i] <= left * claims[i][2] / weight + EPS]
            if not full:  # nobody saturates: hand out the rest in proportion and stop
                for i in hungry:
                    share[i] += left * claims[i][2] / weight
                left = 0.0
                break
            for i in full:  # the saturated take only their demand; divide again
                left -= claims[i][1] - share[i]
                share[i] = claims[i][1]
            left = max(0.0, left)
    return share


def round_largest_remainder(raw: list[float], capacity: float, demands: list[float]) -> list[int]:
    """Round shares down, then give leftover whole GPUs to the largest remainders.

    The units handed out never exceed the whole capacity nor what the shares add
    up to rounded up, and no queue gets more than its demand rounded up.
    """
    floors = [math.floor(x + EPS) for x in raw]
    units = min(math.floor(capacity + EPS), math.ceil(sum(raw) - EPS)) - sum(floors)
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - floors[i]), i))
    for i in order:
        if units <= 0:
            break
        if raw[i] - floors[i] > EPS and floors[i] + 1 <= math.ceil(demands[i] - EPS):
            floors[i] += 1
            units -= 1
    return floors
