"""Which victim goes first: the one order every part of the planner uses. A victim's cost
(`victim_cost`) is its tier, then the work it loses in whole GPU-minutes; the program has one
preemption stage per tier and the greedy scope ranks candidate nodes by `total_cost`, both
built on `victim_cost`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from gpu_policy.model import Job


def lost_work(job: Job, default_age_s: float) -> float:
    """GPU-seconds since the job's last checkpoint: what preempting or moving it loses (an
    unknown age counts as `default_age_s`)."""
    age = job.checkpoint_age_s if job.checkpoint_age_s is not None else default_age_s
    return job.total_gpus * age


def idle_victim(job: Job, idle_jobs: Mapping[str, float], held: Mapping[str, float],
                fair: Mapping[str, float]) -> bool:
    """An idle job (DCGM telemetry) of a queue above its fair share: the first victim."""
    return job.name in idle_jobs and held[job.queue] > fair[job.queue]


def victim_tier(job: Job, idle: bool) -> tuple[int, int]:
    """Which victims go first, before any cost: idle jobs of queues above their share, then
    the lowest priority. The program has one preemption stage per tier (highest first, so
    the lowest tier goes first)."""
    return (0, 0) if idle else (1, job.priority)


class VictimCost(NamedTuple):
    """What preempting one victim costs, compared field by field."""

    tier: tuple[int, int]  # victim_tier
    minutes: int           # lost work (lost_work) in whole GPU-minutes: plans losing the same work tie


def victim_cost(job: Job, default_age_s: float, idle: bool = False) -> VictimCost:
    """The cost of preempting (or moving: `idle` does not matter there) `job`, as the
    program's stages and the greedy scope's rankings both count it."""
    return VictimCost(victim_tier(job, idle), round(lost_work(job, default_age_s) / 60))


def victim_order_key(job: Job, cost: VictimCost) -> tuple:
    """Among valid victims: the lowest cost (`victim_cost`), then the most recently
    submitted (as the program breaks ties)."""
    return (*cost, -job.submitted_at, job.name)


def add_cost(total: tuple, cost: VictimCost) -> tuple:
    """`total` (as `total_cost` counts it) with one more victim of `cost`."""
    out, placed = [], False
    for tier, minutes, count in total:
        if tier == cost.tier:
            minutes, count, placed = minutes + cost.minutes, count + 1, True
        elif tier < cost.tier and not placed:
            out.append((cost.tier, cost.minutes, 1))
            placed = True
        out.append((tier, minutes, count))
    if not placed:
        out.append((cost.tier, cost.minutes, 1))
    return tuple(out)


def total_cost(costs: Iterable[VictimCost]) -> tuple:
    """What a set of victims costs, compared as the program's preemption stages compare
    plans (one stage per tier, highest first): per tier, highest first, the GPU-minutes its
    victims lose, then how many they are. A tier without victims is left out, which compares
    as costing nothing: any victim of a higher tier costs more than all of a lower one, and
    idle jobs of queues above their share, the lowest tier, count only where all else ties."""
    total: tuple = ()
    for cost in costs:
        total = add_cost(total, cost)
    return total
