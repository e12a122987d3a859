"""The time-driven simulator: teams' jobs arrive, wait, run, are preempted or
moved, and finish; a policy decides in rounds.

Simulated time jumps from event to event (an arrival, a finish, a victim leaving its GPUs, a
round). Rounds fall every `round_s` seconds on a fixed grid, and at once when nothing is
placed. A round in which nothing changed since the last one (no arrival, finish, preemption,
move or victim back in the queue) is skipped: a stable policy would decide nothing new
(`skip_unchanged_rounds=False` plans them anyway and counts those that act).

A job that runs makes progress after its restart delay (none on its first start,
`restart_cost_s` after each preemption or move). It checkpoints every `checkpoint_every_s`
seconds of progress. A stopped job leaves as `stopping.departure` says: at once, after its
save, or at its next checkpoint; it holds its GPUs until then, and the job placed on them
begins when they are free (its reclaim wait). What a stop loses, in GPU-seconds, is the work
thrown away since the checkpoint (redone), the restart time the job then spends (restarts)
and the time its GPUs spent saving (saving); so the GPU time a run allocates is exactly the
jobs' durations plus what was lost.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

from gpu_policy.model.checkpointing import checkpoint_wait_s
from gpu_policy.sim.teams.cluster import give_back, take
from gpu_policy.sim.teams.jobs import Decision, Policy, PolicyViolation, RoundView, SimJob
from gpu_policy.sim.teams.metrics import Ledger
from gpu_policy.sim.teams.shares import owed_teams
from gpu_policy.sim.teams.stopping import Departure, departure, draw_trainer
from gpu_policy.sim.teams.trace import GPUS_PER_NODE, TraceJob
from gpu_policy.sim.teams.usage import UsageHistory


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

    save_s: float | None = None
    """Seconds every job takes to save a checkpoint; None: 20 s + 5 s per GPU (`stopping`)."""

    saves_on_request: float = 0.5
    """The share of jobs whose trainer saves when asked and on SIGTERM, drawn per job."""

    seed: int = 0
    """Seeds the draw of the trainers that save on request."""

    reclaim_wait_s: float = 300.0
    """gpu-policy's `policy.reclaim_wait_s`: a stop may wait this long for the victim's
    periodic checkpoint (the other policies never wait)."""

    min_runtime_s: float = 0.0
    """Every team's minimum runtime: no job is a victim before it has run this long."""

    usage_half_life_s: float | None = None
    """gpu-policy's `policy.usage_half_life_s`: its queues carry their decayed usage
    (`usage.UsageHistory`); `kai-time` decays its usage with it too (None: KAI's default,
    no decay)."""

    usage_weight: float = 1.0
    """gpu-policy's `policy.usage_weight`, and `kai-time`'s kValue."""

    @property
    def gpus(self) -> int:
        return self.nodes * GPUS_PER_NODE


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
    usage: UsageHistory             # the GPUs each team held, from the run's start


class Simulation:
    def __init__(self, jobs: list[TraceJob], quotas: dict[str, int], policy: Policy, config: SimConfig,
                 progress: Callable[[int], None] | None = None):
        self.cfg = config
        self.policy = policy
        self.quotas = dict(quotas)
        self.progress = progress
        w0, w1 = config.window
        self.arrivals = [SimJob(j, draw_trainer(j.name, j.gpus, config.saves_on_request, config.seed, config.save_s))
                         for j in jobs if config.start_s <= j.arrival_s < w1]
        self.arrivals.sort(key=lambda j: (j.spec.arrival_s, j.name))
        self.jobs = {j.name: j for j in self.arrivals}
        self.free = [GPUS_PER_NODE] * config.nodes   # GPUs no placed job has: what policies see
        self.idle = [GPUS_PER_NODE] * config.nodes   # GPUs no job occupies, running or leaving
        self.placed: dict[str, SimJob] = {}          # running, or placed and waiting for their GPUs
        self.claims: dict[str, SimJob] = {}          # placed, not running yet: in the order placed
        self.waiting: dict[str, SimJob] = {}
        self.leaving: dict[str, Departure] = {}
        self.held = dict.fromkeys(self.quotas, 0)    # GPUs of each team's placed jobs
        self.finishes: list[tuple[float, int, str, int]] = []
        self.departures: list[tuple[float, int, str]] = []
        self.ledger = Ledger(list(self.quotas), self.quotas, config.gpus, config.window)
        self.usage = UsageHistory(list(self.quotas), config.usage_half_life_s, config.start_s)
        self.rounds = 0
        self.acted_unchanged = 0
        self.finished = 0
        self.horizon_reached = False
        self._arrived = 0  # arrivals queued so far
        self._seq = 0

    def run(self) -> SimRun:
        t = self.cfg.start_s
        self.ledger.advance(t)
        changed = False  # since the last round: an arrival, a finish, a stop, a victim back in the queue
        last_round = -math.inf
        limit = self.cfg.window[1] + self.cfg.drain_limit_s
        while True:
            # a round needs waiting work (with none, no policy has anything to decide), and
            # something that changed; planning every round stops too once nothing can change
            next_round = math.inf
            busy = self.placed or self.leaving or self._arrived < len(self.arrivals)
            if self.waiting and (changed or (not self.cfg.skip_unchanged_rounds and busy)):
                next_round = self._next_grid(t, last_round)
            t_next = min(self._next_arrival(), self._next_finish(), self._next_departure(), next_round)
            if t_next == math.inf:
                break
            if t_next > limit:
                self.horizon_reached, t = True, limit
                break
            self.ledger.advance(t_next)
            t = t_next
            changed |= self._events_at(t)
            if t >= next_round or (changed and self.waiting and not self.placed):
                decision = self._round(t)
                if decision and not changed:
                    self.acted_unchanged += 1
                changed = bool(decision.preempt or decision.move)
                last_round = t
        # the measured time runs to the window's end even when the last job left before it
        self.ledger.close(max(t, self.cfg.window[1]) if math.isfinite(self.cfg.window[1]) else t)
        return SimRun(self.policy.name, self.cfg, list(self.jobs.values()), self.ledger, t, self.rounds,
                      self.acted_unchanged, self.horizon_reached, dict(getattr(self.policy, "stats", {})), self.usage)

    def _next_arrival(self) -> float:
        return self.arrivals[self._arrived].spec.arrival_s if self._arrived < len(self.arrivals) else math.inf

    def _next_finish(self) -> float:
        while self.finishes and self._stale(self.finishes[0]):
            heapq.heappop(self.finishes)
        return self.finishes[0][0] if self.finishes else math.inf

    def _next_departure(self) -> float:
        return self.departures[0][0] if self.departures else math.inf

    def _events_at(self, t: float) -> bool:
        """Finish the jobs that end at `t`, let go the victims that leave, then queue those
        that arrive and begin the placed jobs whose GPUs are free; True if a job finished,
        arrived or waits again."""
        any_event = False
        while self._next_finish() <= t:
            self._finish(self.placed[heapq.heappop(self.finishes)[2]], t)
            any_event = True
        any_event |= self._departures_until(t)
        while self._next_arrival() <= t:
            job = self.arrivals[self._arrived]
            self.waiting[job.name] = job
            self.ledger.demand_changed(job.team, job.gpus)
            self._arrived += 1
            any_event = True
        self._begin_ready(t)
        return any_event

    def _next_grid(self, t: float, last_round: float) -> float:
        step = self.cfg.round_s
        g = math.ceil(t / step) * step
        return g + step if g <= last_round else g

    def _stale(self, item: tuple[float, int, str, int]) -> bool:
        job = self.placed.get(item[2])
        return job is None or not job.running or job.version != item[3]

    def _round(self, t: float) -> Decision:
        self.rounds += 1
        view = RoundView(t, list(self.free), sorted(self.placed.values(), key=lambda j: (j.placed_at, j.name)),
                         list(self.waiting.values()), self.quotas, self.cfg.gpus, self.cfg.checkpoint_every_s,
                         self.cfg.reclaim_wait_s, self.cfg.min_runtime_s, self.usage, self.cfg.usage_half_life_s,
                         self.cfg.usage_weight)
        decision = self.policy.decide(view)
        self._apply(decision, t)
        owed = owed_teams(self.ledger.shares_now(), self.held, ((j.team, j.gpus) for j in self.waiting.values()))
        self.ledger.after_round(t, owed)
        return decision

    def _apply(self, d: Decision, t: float) -> None:
        """Stops, then moves, then starts; victims that leave at once leave, and placed jobs
        whose GPUs are free begin."""
        before, fair = dict(self.held), self.ledger.fair_now()
        vacated: set[int] = set()  # nodes that jobs stopped now are leaving
        for name in d.preempt:
            job = self._placed(name, "preempt")
            self._stopped(job, t, moved=False, within_share=before[job.team] <= fair[job.team])
            give_back(self.free, job.spec, job.nodes)
            self._unplace(job)
            if job.running:
                vacated.update(job.held)
                self._leave(job, t, d.evict_after.get(name))
            elif job.held is None:  # placed and never began there: it waits again at once
                self.waiting[name] = job
        moving = [(self._placed(name, "move"), nodes) for name, nodes in d.move.items()]
        for job, _ in moving:  # every mover leaves before any arrives
            give_back(self.free, job.spec, job.nodes)
        for job, nodes in moving:
            self._stopped(job, t, moved=True)
            job.nodes, job.placed_at = self._nodes(job, nodes), t
            take(self.free, job.spec, job.nodes)
            if job.running:
                vacated.update(job.held)
                self._leave(job, t, d.evict_after.get(job.name))
                self.claims[job.name] = job
        for name, nodes in d.start.items():
            job = self.waiting.pop(name, None)
            if job is None:
                raise PolicyViolation(f"{self.policy.name}: start {name}: the job is not waiting")
            if job.stopped_at is not None and t - job.stopped_at <= 2 * self.cfg.round_s:
                self.ledger.restarted_soon(t, job.team)
            self._place(job, self._nodes(job, nodes), t)
            take(self.free, job.spec, job.nodes)
            job.claimed_at = t if vacated & set(job.nodes) else None
        over = [n for n, room in enumerate(self.free) if room < 0]
        if over:
            raise PolicyViolation(f"{self.policy.name}: node {over[0]} over capacity at t={t:g} "
                                  f"({GPUS_PER_NODE - self.free[over[0]]} of {GPUS_PER_NODE} GPUs)")
        self._departures_until(t)
        self._begin_ready(t)

    def _placed(self, name: str, action: str) -> SimJob:
        job = self.placed.get(name)
        if job is None:
            raise PolicyViolation(f"{self.policy.name}: {action} {name}: the job is not running")
        return job

    def _nodes(self, job: SimJob, nodes) -> tuple[int, ...]:
        nodes = tuple(nodes)
        if len(nodes) != job.spec.replicas or any(not 0 <= n < len(self.free) for n in nodes):
            raise PolicyViolation(f"{self.policy.name}: {job.name} needs {job.spec.replicas} node(s) of "
                                  f"{len(self.free)}, got {list(nodes)}")
        return nodes

    def _place(self, job: SimJob, nodes: tuple[int, ...], t: float) -> None:
        job.nodes, job.placed_at = nodes, t
        self.placed[job.name] = job
        self.claims[job.name] = job
        self.held[job.team] += job.gpus

    def _unplace(self, job: SimJob) -> None:
        del self.placed[job.name]
        self.claims.pop(job.name, None)
        self.held[job.team] -= job.gpus
        job.nodes = None

    def _stopped(self, job: SimJob, t: float, moved: bool, within_share: bool = False) -> None:
        """A preemption or move. `within_share`: its team held no more than its fair share."""
        job.stopped_at = t
        if moved:
            job.moves += 1
        else:
            job.preemptions += 1
        self.ledger.stopped(t, job.team, moved, within_share)

    def _leave(self, job: SimJob, t: float, evict_after_s: float | None) -> None:
        """A running job stops: it leaves its GPUs when `stopping.departure` says."""
        if evict_after_s is not None:
            due = job.next_checkpoint(t, self.cfg.checkpoint_every_s) - t
            if not due <= checkpoint_wait_s(evict_after_s, job.trainer.save_s):
                raise PolicyViolation(f"{self.policy.name}: {job.name} is stopped at its checkpoint due in "
                                      f"{evict_after_s:g} s, but its next checkpoint is {due:g} s away")
        dep = departure(job, t, self.cfg.checkpoint_every_s, self.policy.eviction, evict_after_s)
        job.running = False
        job.version += 1
        self.leaving[job.name] = dep
        heapq.heappush(self.departures, (dep.at, self._seq, job.name))
        self._seq += 1

    def _departures_until(self, t: float) -> bool:
        """Let go every victim that leaves by `t`; True if one waits again or finished."""
        any_event = False
        while self.departures and self.departures[0][0] <= t:
            any_event |= self._depart(self.jobs[heapq.heappop(self.departures)[2]], t)
        return any_event

    def _depart(self, job: SimJob, t: float) -> bool:
        """A stopped job leaves its GPUs: it waits again, waits for the GPUs of the nodes it
        moves to, or finished before its checkpoint came; True unless it moves."""
        dep = self.leaving.pop(job.name)
        for kind, seconds in (("restarts", dep.restart_s), ("redone", dep.redone_s), ("saving", dep.saving_s)):
            self._lose(job, t, seconds * job.gpus, kind)
        job.saved_s = dep.kept_s
        give_back(self.idle, job.spec, job.held)
        job.held = None
        self._held_changed(job, t, -job.gpus)
        if dep.finished:
            if job.nodes is not None:  # a mover: its new place is not needed
                give_back(self.free, job.spec, job.nodes)
                self._unplace(job)
            self._finished(job, t)
            return True
        job.wait_since = t
        if job.nodes is None:
            self.waiting[job.name] = job
        return job.nodes is None

    def _begin_ready(self, t: float) -> None:
        """Placed jobs begin, in the order placed, where every node of theirs has their GPUs free."""
        for job in list(self.claims.values()):
            if job.held is None and all(self.idle[n] >= job.spec.gpus_per_replica for n in job.nodes):
                self._begin(job, t)

    def _begin(self, job: SimJob, t: float) -> None:
        del self.claims[job.name]
        take(self.idle, job.spec, job.nodes)
        job.held, job.running = job.nodes, True
        job.waited_s += t - job.wait_since
        job.wait_since = None
        if job.first_start is None:
            job.first_start = t
        if job.claimed_at is not None:
            self.ledger.reclaim_waited(job.claimed_at, t - job.claimed_at)
            job.claimed_at = None
        job.segment_start = t
        job.delay_s = self.cfg.restart_cost_s if job.runs else 0.0
        job.runs += 1
        job.version += 1
        heapq.heappush(self.finishes, (job.finish_time(), self._seq, job.name, job.version))
        self._seq += 1
        self._held_changed(job, t, job.gpus)

    def _held_changed(self, job: SimJob, t: float, delta: int) -> None:
        """The job's GPUs are occupied (`delta` > 0) or free again: the ledger and the usage history count them."""
        self.ledger.held_changed(job.team, delta)
        self.usage.changed(t, job.team, delta)

    def _lose(self, job: SimJob, t: float, gpu_s: float, kind: str) -> None:
        if gpu_s > 0:
            job.lost_gpu_s += gpu_s
            self.ledger.lost(t, job.team, gpu_s, kind)

    def _finish(self, job: SimJob, t: float) -> None:
        self._lose(job, t, job.restart_spent(t) * job.gpus, "restarts")
        give_back(self.idle, job.spec, job.held)
        give_back(self.free, job.spec, job.nodes)
        job.held, job.running = None, False
        self._unplace(job)
        self._held_changed(job, t, -job.gpus)
        self._finished(job, t)

    def _finished(self, job: SimJob, t: float) -> None:
        job.finish = t
        self.finished += 1
        self.ledger.demand_changed(job.team, -job.gpus)
        if self.progress:
            self.progress(self.finished)


def simulate(jobs: list[TraceJob], quotas: dict[str, int], policy: Policy, config: SimConfig,
             progress: Callable[[int], None] | None = None) -> SimRun:
    """Run one policy over `jobs` on a cluster of `config.nodes` nodes;
    `progress(finished)` after each job that finishes."""
    return Simulation(jobs, quotas, policy, config, progress).run()
