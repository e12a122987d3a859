"""The time-driven simulator: teams' jobs arrive, wait, run, are preempted or
moved, and finish; a policy decides in rounds.

Simulated time jumps from event to event (an arrival, a finish, a round). Rounds
fall every `round_s` seconds on a fixed grid, and at once when nothing runs. A
round in which nothing changed since the last one (no arrival, finish,
preemption or move) is skipped: a stable policy would decide nothing new
(`skip_unchanged_rounds=False` plans them anyway and counts those that act).

A job that runs makes progress after its restart delay (none on its first
start, `restart_cost_s` after each preemption or move). It checkpoints every
`checkpoint_every_s` seconds of progress; a preempted or moved job goes back to
its last checkpoint. What a preemption or move loses is the work since that
checkpoint and the restart time the job then spends, in GPU-seconds; so the
GPU time a run allocates is exactly the jobs' durations plus what was lost.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gpu_policy.sim.teams.cluster import give_back, take
from gpu_policy.sim.teams.metrics import Ledger
from gpu_policy.sim.teams.shares import owed_teams
from gpu_policy.sim.teams.trace import GPUS_PER_NODE, TraceJob


@dataclass
class SimConfig:
    nodes: int = 96
    """Nodes of 8 GPUs (96: 768 GPUs, where the workload's demand exceeds capacity)."""

    round_s: float = 300.0
    """Seconds between decision rounds (a scheduler cycle, or a pipeline step's plan)."""

    checkpoint_every_s: float | None = 1800.0
    """Seconds of progress between checkpoints; None: never (a preempted job starts over)."""

    restart_cost_s: float = 60.0
    """Seconds a restarted job holds its GPUs before it makes progress again
    (loading the checkpoint, rebuilding the process group)."""

    start_s: float = 0.0
    """Simulated time the run begins: jobs that arrive earlier are not simulated."""

    window: tuple[float, float] = (0.0, math.inf)
    """The measured time: jobs that arrive in it are measured, time metrics cover
    it. No job arrives after it; the run goes on until every job has finished or
    can never start."""

    skip_unchanged_rounds: bool = True
    """Skip rounds in which nothing changed since the last one."""

    drain_limit_s: float = 400 * 86_400.0
    """Most simulated seconds after the window: a guard against a policy that never
    lets some job finish (the workload's longest job runs 131 days)."""

    @property
    def gpus(self) -> int:
        return self.nodes * GPUS_PER_NODE


class SimJob:
    """A job's state in the simulation. Policies read it; only the engine changes it."""

    __slots__ = ("spec", "nodes", "saved_s", "segment_start", "delay_s", "first_start", "finish", "wait_since",
                 "waited_s", "preemptions", "moves", "lost_gpu_s", "stopped_at", "version")

    def __init__(self, spec: TraceJob):
        self.spec = spec
        self.nodes: tuple[int, ...] | None = None  # where it runs; None while it waits
        self.saved_s = 0.0            # progress it restarts from (its last checkpoint)
        self.segment_start = 0.0      # when it last started
        self.delay_s = 0.0            # restart delay of this run
        self.first_start: float | None = None
        self.finish: float | None = None
        self.wait_since: float | None = spec.arrival_s
        self.waited_s = 0.0           # time spent waiting so far, after each preemption too
        self.preemptions = 0
        self.moves = 0
        self.lost_gpu_s = 0.0
        self.stopped_at: float | None = None  # when it was last preempted or moved
        self.version = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def team(self) -> str:
        return self.spec.team

    @property
    def gpus(self) -> int:
        return self.spec.held_gpus

    def progress(self, now: float) -> float:
        return self.saved_s + max(0.0, now - self.segment_start - self.delay_s)

    def last_checkpoint(self, now: float, every: float | None) -> float:
        if every is None:
            return self.saved_s
        done = max(0.0, now - self.segment_start - self.delay_s)
        return self.saved_s + math.floor(done / every) * every

    def finish_time(self) -> float:
        return self.segment_start + self.delay_s + self.spec.duration_s - self.saved_s


@dataclass
class RoundView:
    """What a policy sees in a round. `free` is a copy it may use as scratch."""

    now: float
    free: list[int]
    running: list[SimJob]        # by start time
    waiting: list[SimJob]        # by arrival
    quotas: dict[str, int]
    gpus: int
    checkpoint_every_s: float | None

    def held(self) -> dict[str, int]:
        out = dict.fromkeys(self.quotas, 0)
        for job in self.running:
            out[job.team] += job.gpus
        return out

    def checkpoint_age(self, job: SimJob) -> float:
        """Seconds of work the job would lose if stopped now."""
        return job.progress(self.now) - job.last_checkpoint(self.now, self.checkpoint_every_s)


@dataclass
class Decision:
    preempt: list[str] = field(default_factory=list)
    move: dict[str, tuple[int, ...]] = field(default_factory=dict)   # job -> its new nodes
    start: dict[str, tuple[int, ...]] = field(default_factory=dict)  # job -> its nodes

    def __bool__(self) -> bool:
        return bool(self.preempt or self.move or self.start)


class Policy(Protocol):
    name: str

    def decide(self, view: RoundView) -> Decision: ...


class PolicyViolation(RuntimeError):
    """A policy decided something impossible (a bug in the policy, not bad input)."""


@dataclass
class SimRun:
    policy: str
    config: SimConfig
    jobs: list[SimJob]
    ledger: Ledger
    end_s: float
    rounds: int
    acted_unchanged: int            # rounds with nothing changed that acted (skipping off)
    horizon_reached: bool           # stopped at `drain_limit_s` with jobs unfinished
    policy_stats: dict


class Simulation:
    def __init__(self, jobs: list[TraceJob], quotas: dict[str, int], policy: Policy, config: SimConfig,
                 progress: Callable[[int], None] | None = None):
        self.cfg = config
        self.policy = policy
        self.quotas = dict(quotas)
        self.progress = progress
        w0, w1 = config.window
        self.arrivals = [SimJob(j) for j in jobs if config.start_s <= j.arrival_s < w1]
        self.arrivals.sort(key=lambda j: (j.spec.arrival_s, j.name))
        self.jobs = {j.name: j for j in self.arrivals}
        self.free = [GPUS_PER_NODE] * config.nodes
        self.running: dict[str, SimJob] = {}
        self.waiting: dict[str, SimJob] = {}
        self.held = dict.fromkeys(self.quotas, 0)
        self.finishes: list[tuple[float, int, str, int]] = []
        self.ledger = Ledger(list(self.quotas), self.quotas, config.gpus, config.window)
        self.rounds = 0
        self.acted_unchanged = 0
        self.finished = 0
        self.horizon_reached = False
        self._arrived = 0  # arrivals queued so far
        self._seq = 0

    def run(self) -> SimRun:
        t = self.cfg.start_s
        self.ledger.advance(t)
        changed = False  # since the last round: an arrival, a finish, a preemption or a move
        last_round = -math.inf
        limit = self.cfg.window[1] + self.cfg.drain_limit_s
        while True:
            # a round needs waiting work (with none, no policy has anything to decide), and
            # something that changed; planning every round stops too once nothing can change
            next_round = math.inf
            busy = self.running or self._arrived < len(self.arrivals)
            if self.waiting and (changed or (not self.cfg.skip_unchanged_rounds and busy)):
                next_round = self._next_grid(t, last_round)
            t_next = min(self._next_arrival(), self._next_finish(), next_round)
            if t_next == math.inf:
                break
            if t_next > limit:
                self.horizon_reached, t = True, limit
                break
            self.ledger.advance(t_next)
            t = t_next
            changed |= self._events_at(t)
            if t >= next_round or (changed and self.waiting and not self.running):
                decision = self._round(t)
                if decision and not changed:
                    self.acted_unchanged += 1
                changed = bool(decision.preempt or decision.move)
                last_round = t
        # the measured time runs to the window's end even when the last job left before it
        self.ledger.close(max(t, self.cfg.window[1]) if math.isfinite(self.cfg.window[1]) else t)
        return SimRun(self.policy.name, self.cfg, list(self.jobs.values()), self.ledger, t, self.rounds,
                      self.acted_unchanged, self.horizon_reached, dict(getattr(self.policy, "stats", {})))

    def _next_arrival(self) -> float:
        return self.arrivals[self._arrived].spec.arrival_s if self._arrived < len(self.arrivals) else math.inf

    def _next_finish(self) -> float:
        while self.finishes and self._stale(self.finishes[0]):
            heapq.heappop(self.finishes)
        return self.finishes[0][0] if self.finishes else math.inf

    def _events_at(self, t: float) -> bool:
        """Finish the jobs that end at `t`, then queue those that arrive; True if any."""
        any_event = False
        while self._next_finish() <= t:
            self._finish(self.running[heapq.heappop(self.finishes)[2]], t)
            any_event = True
            if self.progress:
                self.progress(self.finished)
        while self._next_arrival() <= t:
            job = self.arrivals[self._arrived]
            self.waiting[job.name] = job
            self.ledger.demand_changed(job.team, job.gpus)
            self._arrived += 1
            any_event = True
        return any_event

    def _next_grid(self, t: float, last_round: float) -> float:
        step = self.cfg.round_s
        g = math.ceil(t / step) * step
        return g + step if g <= last_round else g

    def _stale(self, item: tuple[float, int, str, int]) -> bool:
        job = self.running.get(item[2])
        return job is None or job.version != item[3]

    def _round(self, t: float) -> Decision:
        self.rounds += 1
        view = RoundView(t, list(self.free), sorted(self.running.values(), key=lambda j: (j.segment_start, j.name)),
                         list(self.waiting.values()), self.quotas, self.cfg.gpus, self.cfg.checkpoint_every_s)
        decision = self.policy.decide(view)
        self._apply(decision, t)
        owed = owed_teams(self.ledger.shares_now(), self.held, ((j.team, j.gpus) for j in self.waiting.values()))
        self.ledger.after_round(t, owed)
        return decision

    def _apply(self, d: Decision, t: float) -> None:
        before, fair = dict(self.held), self.ledger.fair_now()
        for name in d.preempt:
            job = self._running(name, "preempt")
            give_back(self.free, job.spec, job.nodes)
            self._stop(job, t, moved=False, within_share=before[job.team] <= fair[job.team])
            del self.running[name]
            self.held[job.team] -= job.gpus
            self.ledger.held_changed(job.team, -job.gpus)
            self.waiting[name] = job
            job.wait_since = t
        moving = [(self._running(name, "move"), nodes) for name, nodes in d.move.items()]
        for job, _ in moving:  # every mover leaves before any arrives
            give_back(self.free, job.spec, job.nodes)
        for job, nodes in moving:
            self._stop(job, t, moved=True)
            self._launch(job, nodes, t)
        for name, nodes in d.start.items():
            job = self.waiting.pop(name, None)
            if job is None:
                raise PolicyViolation(f"{self.policy.name}: start {name}: the job is not waiting")
            job.waited_s += t - job.wait_since
            job.wait_since = None
            if job.stopped_at is not None and t - job.stopped_at <= 2 * self.cfg.round_s:
                self.ledger.restarted_soon(t, job.team)
            if job.first_start is None:
                job.first_start = t
            self._launch(job, nodes, t)
            self.running[name] = job
            self.held[job.team] += job.gpus
            self.ledger.held_changed(job.team, job.gpus)
        over = [n for n, room in enumerate(self.free) if room < 0]
        if over:
            raise PolicyViolation(f"{self.policy.name}: node {over[0]} over capacity at t={t:g} "
                                  f"({GPUS_PER_NODE - self.free[over[0]]} of {GPUS_PER_NODE} GPUs)")

    def _running(self, name: str, action: str) -> SimJob:
        job = self.running.get(name)
        if job is None:
            raise PolicyViolation(f"{self.policy.name}: {action} {name}: the job is not running")
        return job

    def _stop(self, job: SimJob, t: float, moved: bool, within_share: bool = False) -> None:
        """End a run early: the job goes back to its last checkpoint and loses the
        work since then. `within_share`: its team held no more than its fair share."""
        self._settle_restart(job, t)
        saved = job.last_checkpoint(t, self.cfg.checkpoint_every_s)
        self._lose(job, t, (job.progress(t) - saved) * job.gpus)
        job.saved_s = saved
        job.nodes = None
        job.stopped_at = t
        job.version += 1
        if moved:
            job.moves += 1
        else:
            job.preemptions += 1
        self.ledger.stopped(t, job.team, moved, within_share)

    def _settle_restart(self, job: SimJob, t: float) -> None:
        """A run ends: the restart time it spent (all of it, unless stopped sooner)
        was lost to the preemption or move before it."""
        self._lose(job, t, min(job.delay_s, t - job.segment_start) * job.gpus)

    def _lose(self, job: SimJob, t: float, gpu_s: float) -> None:
        if gpu_s > 0:
            job.lost_gpu_s += gpu_s
            self.ledger.lost(t, job.team, gpu_s)

    def _launch(self, job: SimJob, nodes: tuple[int, ...], t: float) -> None:
        nodes = tuple(nodes)
        if len(nodes) != job.spec.replicas or any(not 0 <= n < len(self.free) for n in nodes):
            raise PolicyViolation(f"{self.policy.name}: {job.name} needs {job.spec.replicas} node(s) of "
                                  f"{len(self.free)}, got {list(nodes)}")
        take(self.free, job.spec, nodes)
        job.nodes = nodes
        job.segment_start = t
        job.delay_s = self.cfg.restart_cost_s if (job.preemptions or job.moves) else 0.0
        job.version += 1
        heapq.heappush(self.finishes, (job.finish_time(), self._seq, job.name, job.version))
        self._seq += 1

    def _finish(self, job: SimJob, t: float) -> None:
        self._settle_restart(job, t)
        give_back(self.free, job.spec, job.nodes)
        job.nodes = None
        job.finish = t
        self.finished += 1
        del self.running[job.name]
        self.held[job.team] -= job.gpus
        self.ledger.held_changed(job.team, -job.gpus)
        self.ledger.demand_changed(job.team, -job.gpus)


def simulate(jobs: list[TraceJob], quotas: dict[str, int], policy: Policy, config: SimConfig,
             progress: Callable[[int], None] | None = None) -> SimRun:
    """Run one policy over `jobs` on a cluster of `config.nodes` nodes;
    `progress(finished)` after each job that finishes."""
    return Simulation(jobs, quotas, policy, config, progress).run()
