"""Each queue's fair share of the cluster's GPUs (docs/policy.md, "Fair share").

Every queue first gets ``min(deserved, demand)``. What capacity is left goes to
queues with unmet demand: higher ``priority`` tiers first; inside a tier by
water-filling in proportion to ``over_quota_weight``. Departments (``parent``)
are divided first, then their queues share the department's part. Shares are
whole GPUs: round down, then hand the leftover units to the largest remainders;
a share never falls below ``min(deserved, demand)`` rounded up.

Fair share over time (`usage_weights`): with the policy's ``usage_half_life_s`` set, each
queue's past usage (``usage_gpu_h``, already decayed; a department's is the sum of its
queues' and its own) lowers its part of the surplus beyond ``deserved``, never its guarantee:
between queues of equal weight and demand, the one that used less gets more. With no usage,
or ``usage_weight: 0``, the division is exactly the plain one. docs/policy.md says where the
formula comes from (KAI-Scheduler's time-based fair share) and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpu_policy.model import EPS, Scenario
from gpu_policy.model.placement import refusals
from gpu_policy.model.usage import decayed_gpu_h


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
                demands: dict[str, QueueDemand] | None = None, with_usage: bool = True) -> dict[str, int]:
    """Whole-GPU fair share of every queue and department, by name; `demands`:
    `queue_demands(s)`, when the caller has them (a pass over every job); `with_usage`: count
    past usage where the policy says to (False: the shares without it, to say what usage
    changed)."""
    demands = queue_demands(s) if demands is None else demands
    shares: dict[str, int] = {}
    total = s.gpus_schedulable if capacity is None else capacity
    usage = queue_usage(s) if with_usage and s.policy.counts_usage else None

    def divide(parent: str | None, available: float) -> None:
        kids = s.children(parent)
        if not kids:
            return
        used = None if usage is None else usage_fractions([usage[k.name] for k in kids], available,
                                                         s.policy.usage_half_life_s)
        raw = split_capacity(
            available,
            [(k.deserved, demands[k.name].total, k.over_quota_weight, k.priority) for k in kids],
            used, s.policy.usage_weight,
        )
        whole = round_largest_remainder(raw, available, [demands[k.name].total for k in kids], used)
        for kid, share in zip(kids, whole):
            # whole GPUs never below the guarantee: min(deserved, demand), rounded up
            shares[kid.name] = max(share, math.ceil(min(kid.deserved, demands[kid.name].total) - EPS))
            divide(kid.name, shares[kid.name])

    divide(None, total)
    return shares


def queue_usage(s: Scenario) -> dict[str, float]:
    """Each queue's past usage in GPU-hours: its own `usage_gpu_h`, plus, for a department,
    its queues'."""
    out = {q.name: q.usage_gpu_h for q in s.queues}
    parent = {q.name: q.parent for q in s.queues}
    for q in s.queues:  # each queue's own usage counts in every department above it
        up = parent[q.name]
        while up is not None:
            out[up] += q.usage_gpu_h
            up = parent[up]
    return out


def usage_fractions(usage_gpu_h: list[float], gpus: float, half_life_s: float) -> list[float]:
    """Past usage as fractions of `gpus` GPUs: each GPU-hours figure over the decayed GPU-hours
    of those GPUs busy all along, gpus * half_life / ln 2 (in hours). A queue that has held x of
    the GPUs for many half-lives has used x / gpus of them; KAI normalises the same way, by
    the cluster's decayed capacity over its window. Where the usage adds up to more than that
    (the GPUs divided were more before: a department whose share shrank), over the usage's sum,
    so that the fractions never add up to more than 1."""
    whole = max(gpus * decayed_gpu_h(math.inf, half_life_s), sum(usage_gpu_h))
    return [u / whole if whole > 0 else 0.0 for u in usage_gpu_h]


def usage_weights(weights: list[float], used: list[float], k: float) -> list[float]:
    """The weights by which claimants of one tier share the surplus once their past usage
    counts (KAI-Scheduler's time-based fair share): each one's entitled part W = w / sum(w),
    the part of the GPUs it `used` U (`usage_fractions`, adding up to 1 at most), and its
    weight max(0, W + k (W - U)). A claimant that used more than its entitled part gets less,
    one that used less gets more; the weights add up to at least 1. No usage at all, or k = 0,
    gives W: the plain division."""
    total_w = sum(weights)
    if k <= 0 or total_w <= 0 or not any(u > 0 for u in used):
        return list(weights)
    return [max(0.0, w / total_w + k * (w / total_w - u)) for w, u in zip(weights, used)]


def split_capacity(capacity: float, claims: list[tuple[float, float, float, int]],
                   used: list[float] | None = None, usage_weight: float = 0.0) -> list[float]:
    """Divide `capacity` among claims of (deserved, demand, weight, priority tier).

    Deserved first (never cut, even when guarantees exceed capacity), then the
    surplus tier by tier, water-filled by weight; nobody gets above its demand. With
    `used` (each claim's past usage, `usage_fractions` of `capacity`) and `usage_weight`, the
    weights of each round of the water-filling are `usage_weights` among the claims still
    hungry in it.
    """
    share = [min(deserved, demand) for deserved, demand, _, _ in claims]
    left = max(0.0, capacity - sum(share))
    for tier in sorted({c[3] for c in claims}, reverse=True):
        members = [i for i, c in enumerate(claims) if c[3] == tier and c[2] > 0]
        while left > EPS:
            hungry = [i for i in members if claims[i][1] - share[i] > EPS]
            if not hungry:
                break
            plain = [claims[i][2] for i in hungry]
            mine = dict(zip(hungry, plain if used is None else
                            usage_weights(plain, [used[i] for i in hungry], usage_weight)))
            weight = sum(mine.values())
            full = [i for i in hungry if claims[i][1] - share[i] <= left * mine[i] / weight + EPS]
            if not full:  # nobody saturates: hand out the rest in proportion and stop
                for i in hungry:
                    share[i] += left * mine[i] / weight
                left = 0.0
                break
            for i in full:  # the saturated take only their demand; divide again
                left -= claims[i][1] - share[i]
                share[i] = claims[i][1]
            left = max(0.0, left)
    return share


def round_largest_remainder(raw: list[float], capacity: float, demands: list[float],
                            used: list[float] | None = None) -> list[int]:
    """Round shares down, then give leftover whole GPUs to the largest remainders; between
    equal remainders, to the one that `used` less (past usage, where it counts), then in order.

    The units handed out never exceed the whole capacity nor what the shares add
    up to rounded up, and no queue gets more than its demand rounded up.
    """
    floors = [math.floor(x + EPS) for x in raw]
    units = min(math.floor(capacity + EPS), math.ceil(sum(raw) - EPS)) - sum(floors)
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - floors[i]), used[i] if used else 0.0, i))
    for i in order:
        if units <= 0:
            break
        if raw[i] - floors[i] > EPS and floors[i] + 1 <= math.ceil(demands[i] - EPS):
            floors[i] += 1
            units -= 1
    return floors
