"""A job's state in the simulation, what a policy sees in a round and what it decides.

A job is *waiting*, *placed* (a policy gave it nodes: it runs there, or waits for the GPUs
there to be free), or *leaving* (stopped, holding its old GPUs until its save or its
checkpoint is done). Policies see waiting and placed jobs; a leaving job is out of their
sight until it has left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from gpu_policy.sim.teams.stopping import Eviction, Trainer
from gpu_policy.sim.teams.trace import TraceJob
from gpu_policy.sim.teams.usage import UsageHistory


class SimJob:
    """A job's state in the simulation. Policies read it; only the engine changes it."""

    __slots__ = ("spec", "trainer", "nodes", "held", "running", "saved_s", "segment_start", "delay_s", "runs",
                 "placed_at", "claimed_at", "first_start", "finish", "wait_since", "waited_s", "preemptions",
                 "moves", "lost_gpu_s", "stopped_at", "version")

    def __init__(self, spec: TraceJob, trainer: Trainer):
        self.spec = spec
        self.trainer = trainer
        self.nodes: tuple[int, ...] | None = None  # where a policy placed it; None while it waits or leaves
        self.held: tuple[int, ...] | None = None   # the nodes whose GPUs it occupies (running or leaving)
        self.running = False          # it runs on `nodes` (began there and has not been stopped)
        self.saved_s = 0.0            # progress it restarts from (its last checkpoint)
        self.segment_start = 0.0      # when it last began running
        self.delay_s = 0.0            # restart delay of this run
        self.runs = 0                 # times it began running
        self.placed_at = 0.0          # when a policy last placed it
        self.claimed_at: float | None = None  # placed on GPUs that jobs stopped in the same round were leaving
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

    def _done(self, now: float) -> float:
        """Seconds of progress in the current run (none unless it runs)."""
        return max(0.0, now - self.segment_start - self.delay_s) if self.running else 0.0

    def progress(self, now: float) -> float:
        return self.saved_s + self._done(now)

    def last_checkpoint(self, now: float, every: float | None) -> float:
        if every is None:
            return self.saved_s
        return self.saved_s + math.floor(self._done(now) / every) * every

    def next_checkpoint(self, now: float, every: float | None) -> float:
        """When its next periodic checkpoint is written (inf: never)."""
        if every is None or not self.running:
            return math.inf
        return self.segment_start + self.delay_s + (math.floor(self._done(now) / every) + 1) * every

    def restart_spent(self, now: float) -> float:
        """Seconds of this run's restart delay spent by `now`."""
        return min(self.delay_s, now - self.segment_start) if self.running else 0.0

    def finish_time(self) -> float:
        return self.segment_start + self.delay_s + self.spec.duration_s - self.saved_s


@dataclass
class RoundView:
    """What a policy sees in a round. `free` is a copy it may use as scratch."""

    now: float
    free: list[int]
    running: list[SimJob]        # placed jobs, by when they were placed
    waiting: list[SimJob]        # by arrival
    quotas: dict[str, int]
    gpus: int
    checkpoint_every_s: float | None
    reclaim_wait_s: float = 0.0  # gpu-policy's: a stop may wait this long for the victim's checkpoint
    min_runtime_s: float = 0.0   # every team's: a job is no victim before it has run this long
    usage: UsageHistory | None = None  # what each team held so far (None: no history kept)
    usage_half_life_s: float | None = None  # gpu-policy's policy.usage_half_life_s (None: no history counts)
    usage_weight: float = 1.0    # gpu-policy's policy.usage_weight, kai-time's kValue

    def held(self) -> dict[str, int]:
        out = dict.fromkeys(self.quotas, 0)
        for job in self.running:
            out[job.team] += job.gpus
        return out

    def checkpoint_age(self, job: SimJob) -> float:
        """Seconds of work the job would lose if stopped now."""
        return job.progress(self.now) - job.last_checkpoint(self.now, self.checkpoint_every_s)

    def running_for(self, job: SimJob) -> float:
        """Seconds since the job last began running (0 while it waits for its GPUs)."""
        return self.now - job.segment_start if job.running else 0.0

    def waiting_for(self, job: SimJob) -> float:
        """Seconds since the job last began to wait."""
        return self.now - job.wait_since if job.wait_since is not None else 0.0

    def protected(self, job: SimJob) -> bool:
        """Too young to stop: it has run less than `min_runtime_s`."""
        return self.running_for(job) < self.min_runtime_s


@dataclass
class Decision:
    preempt: list[str] = field(default_factory=list)
    move: dict[str, tuple[int, ...]] = field(default_factory=dict)   # job -> its new nodes
    start: dict[str, tuple[int, ...]] = field(default_factory=dict)  # job -> its nodes
    evict_after: dict[str, float] = field(default_factory=dict)      # preempted or moved job -> seconds
    """A stop that waits for the victim's periodic checkpoint, due in that many seconds."""

    def __bool__(self) -> bool:
        return bool(self.preempt or self.move or self.start)


class Policy(Protocol):
    name: str
    eviction: Eviction  # how it stops a victim (stopping.KUBERNETES or stopping.CONTRACT)

    def decide(self, view: RoundView) -> Decision: ...


class PolicyViolation(RuntimeError):
    """A policy decided something impossible (a bug in the policy, not bad input)."""
