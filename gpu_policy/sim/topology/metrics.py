"""What a run measured (docs/simulate.md, "simulate topology", defines each)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_policy.sim.topology.engine import Run
from gpu_policy.sim.topology.workload import Gang


@dataclass(frozen=True)
class Metrics:
    policy: str
    seed: int
    jobs: int
    allocated_at_first_required_wait: float | None  # share of the GPUs, after that round
    first_required_wait_s: float | None
    allocated_while_required_waits: float | None  # mean share over every round after which one waits
    utilization: float  # time-weighted allocated share, first to last arrival
    gangs: int
    racks_per_gang: float | None  # mean racks a gang (2+ replicas) spans at its first start
    racks_by_request: dict[str, float]  # the same per request ("required rack", ..., "none")
    required_broken: int  # jobs started outside their required level's one domain
    largest: int  # jobs asking more GPUs than one rack holds
    largest_wait_mean_s: float | None
    largest_wait_p95_s: float | None
    wait_mean_s: float | None
    moves: int
    preemptions: int
    plans: int
    plan_seconds: float
    slowest_plan_s: float
    plans_at_time_limit: int  # 0: no decision depended on how busy the machine was


def measure(run: Run, seed: int) -> Metrics:
    shape = run.shape
    rack = shape.nodes_per("rack")
    spans = {g.name: _spans(run, g) for g in run.jobs}
    gangs = [spans[g.name]["rack"] for g in run.jobs if g.is_gang]
    by_request: dict[str, list[int]] = {}
    for g in run.jobs:
        if g.is_gang:
            by_request.setdefault(request(g), []).append(spans[g.name]["rack"])
    broken = sum(1 for g in run.jobs if g.required is not None and spans[g.name][g.required] > 1)
    largest = [_wait(run, g) for g in run.jobs if g.total_gpus > rack * shape.gpus]
    first = run.first_required_waits
    return Metrics(
        policy=run.policy, seed=seed, jobs=len(run.jobs),
        allocated_at_first_required_wait=None if first is None else first[1],
        first_required_wait_s=None if first is None else first[0],
        allocated_while_required_waits=float(np.mean(run.required_waits)) if run.required_waits else None,
        utilization=utilization(run), gangs=len(gangs),
        racks_per_gang=float(np.mean(gangs)) if gangs else None,
        racks_by_request={k: float(np.mean(v)) for k, v in sorted(by_request.items())}, required_broken=broken,
        largest=len(largest), largest_wait_mean_s=_mean(largest), largest_wait_p95_s=_p95(largest),
        wait_mean_s=_mean([_wait(run, g) for g in run.jobs]), moves=run.moves, preemptions=run.preemptions,
        plans=int(run.stats.get("plans", run.rounds)), plan_seconds=float(run.stats.get("plan_seconds", 0.0)),
        slowest_plan_s=float(run.stats.get("slowest_plan_s", 0.0)),
        plans_at_time_limit=int(run.stats.get("plans_at_time_limit", 0)))


def request(g: Gang) -> str:
    """The job's topology request in words: "required rack, preferred ...", or "none"."""
    parts = [f"{kind} {level}" for kind, level in (("required", g.required), ("preferred", g.preferred)) if level]
    return ", ".join(parts) or "none"


def _spans(run: Run, g: Gang) -> dict[str, int]:
    """Domains of each level the job's first start used."""
    nodes = run.started[g.name].nodes
    return {level: len({run.shape.domain(n, level) for n in nodes}) for level in ("block", "rack")}


def _wait(run: Run, g: Gang) -> float:
    return run.started[g.name].at - g.arrival_s


def utilization(run: Run) -> float:
    """Allocated GPUs, time-weighted, from the first arrival to the last, as a share."""
    first, last = run.jobs[0].arrival_s, run.jobs[-1].arrival_s
    samples = [(t, a) for t, a in run.allocated if t <= last]
    if last <= first or not samples:
        return samples[-1][1] / run.shape.total_gpus if samples else 0.0
    area = 0.0
    for (t0, a), (t1, _) in zip(samples, samples[1:] + [(last, 0)]):
        area += a * (max(t1, first) - max(t0, first))
    return area / ((last - first) * run.shape.total_gpus)


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def _p95(xs: list[float]) -> float | None:
    return float(np.percentile(xs, 95)) if xs else None
