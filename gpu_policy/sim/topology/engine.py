"""The simulation: rounds every `round_s` seconds; jobs that finished leave, arrivals join
the queue, the policy decides, its starts, moves and preemptions are applied. A round in
which nothing arrived or left and no job waits asks the policy nothing. The run ends when
every job has arrived and started."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpu_policy.sim.topology.cluster import Cluster, Shape
from gpu_policy.sim.topology.policy import Decision, Policy, View
from gpu_policy.sim.topology.workload import Gang


@dataclass
class Started:
    """A job's first start: when, and on which nodes (one per replica)."""
    at: float
    nodes: tuple[int, ...]


@dataclass
class Run:
    """What one policy did with one arrival sequence."""
    policy: str
    shape: Shape
    jobs: list[Gang]
    started: dict[str, Started] = field(default_factory=dict)
    first_required_waits: tuple[float, float, str] | None = None  # (time, allocated share, job)
    required_waits: list[float] = field(default_factory=list)  # allocated share after each such round
    allocated: list[tuple[float, int]] = field(default_factory=list)  # (round time, GPUs allocated after it)
    moves: int = 0
    preemptions: int = 0
    rounds: int = 0
    stats: dict = field(default_factory=dict)


def simulate(policy: Policy, shape: Shape, jobs: list[Gang], round_s: float) -> Run:
    """Run `policy` on `jobs` (in arrival order) until all have started."""
    cluster = Cluster(shape)
    run = Run(policy.name, shape, jobs)
    running: dict[str, tuple[Gang, tuple[int, ...]]] = {}
    ends: dict[str, float] = {}
    waiting: list[Gang] = []
    arrived = 0
    now = 0.0
    while arrived < len(jobs) or waiting:
        changed = False
        for name in [n for n, end in ends.items() if end <= now]:
            g, nodes = running.pop(name)
            cluster.give(nodes, g.gpus)
            del ends[name]
            changed = True
        while arrived < len(jobs) and jobs[arrived].arrival_s <= now:
            waiting.append(jobs[arrived])
            arrived += 1
            changed = True
        if changed and waiting:
            decision = policy.decide(View(now, cluster, running, list(waiting)))
            run.rounds += 1
            _apply(decision, now, cluster, running, ends, waiting, run)
            _note_required_waiting(run, now, cluster, waiting)
        run.allocated.append((now, cluster.allocated))
        now = _next_round(now, round_s, jobs, arrived, ends)
    run.stats = dict(getattr(policy, "stats", {}))
    return run


def _apply(d: Decision, now: float, cluster: Cluster, running: dict, ends: dict, waiting: list[Gang], run: Run) -> None:
    """Preemptions free their GPUs first, then moves, then starts take theirs."""
    for name in d.preempt:
        g, nodes = running.pop(name)
        cluster.give(nodes, g.gpus)
        del ends[name]
        waiting.append(g)
        run.preemptions += 1
    waiting.sort(key=lambda g: g.arrival_s)
    for name in d.move:  # all movers leave before any arrives: they may trade places
        g, old = running[name]
        cluster.give(old, g.gpus)
    for name, nodes in d.move.items():
        g, _ = running[name]
        cluster.take(nodes, g.gpus)
        running[name] = (g, nodes)
        run.moves += 1
    by_name = {g.name: g for g in waiting}
    for name, nodes in d.start.items():
        g = by_name[name]
        if len(nodes) != g.replicas:
            raise ValueError(f"{run.policy} started {name} on {len(nodes)} nodes; it has {g.replicas} replicas")
        cluster.take(nodes, g.gpus)
        running[name] = (g, nodes)
        ends[name] = now + g.duration_s
        run.started.setdefault(name, Started(now, nodes))
        waiting.remove(g)


def _note_required_waiting(run: Run, now: float, cluster: Cluster, waiting: list[Gang]) -> None:
    """The rounds after which a job with a required level is still waiting, the first apart."""
    stuck = next((g for g in waiting if g.required is not None), None)
    if stuck is not None:
        share = cluster.allocated / cluster.shape.total_gpus
        run.required_waits.append(share)
        if run.first_required_waits is None:
            run.first_required_waits = (now, share, stuck.name)


def _next_round(now: float, round_s: float, jobs: list[Gang], arrived: int, ends: dict[str, float]) -> float:
    """The first round at which a job arrives or leaves (the rounds between change nothing)."""
    events = list(ends.values())
    if arrived < len(jobs):
        events.append(jobs[arrived].arrival_s)
    if not events:
        raise ValueError("jobs wait on an empty cluster that cannot hold them")
    return max(now + round_s, math.ceil(min(events) / round_s) * round_s)
