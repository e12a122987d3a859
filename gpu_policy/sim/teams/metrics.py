"""What a run measures: the ledger kept while it runs, and the metrics read from
it and from the jobs afterwards (docs/simulate.md defines each).

Time metrics cover the measured window only; job metrics cover the jobs that
arrive in it, followed until they finish.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gpu_policy.planner.core.queues import Shares
from gpu_policy.sim.teams.shares import team_shares

#: The kinds of lost work, as the JSON names them: work redone since the last checkpoint,
#: restart time, and time spent saving when stopped
LOSSES = ("redone", "restarts", "saving")

#: Width of the time bins kept for the plot, in seconds (wider when the window
#: would need more than `MAX_BINS` of them).
BIN_S = 3600.0
MAX_BINS = 2000

#: The measured days are split into weeks for the surplus each team got in each
WEEK_S = 7 * 86_400.0
#: A team borrowed heavily in a week when the GPUs it held beyond its quota averaged at
#: least this part of the cluster's GPUs over the week (5%: 38 of 768 GPUs)
HEAVY_BORROWING = 0.05


class Ledger:
    """Integrals over the measured window, per team: GPUs held, fair share, GPUs held
    beyond the quota (per week), time below the guarantee (judged after each round),
    preemptions and lost work."""

    def __init__(self, teams: list[str], quotas: dict[str, int], capacity: int, window: tuple[float, float]):
        self.teams = teams
        self.quotas = quotas
        self.capacity = capacity
        self.w0, self.w1 = window
        self.t: float | None = None
        self.held = dict.fromkeys(teams, 0)
        self.demand = dict.fromkeys(teams, 0)
        self.fair = dict.fromkeys(teams, 0)
        self.shares: Shares | None = None
        self._shares_stale = True
        self.owed: set[str] = set()
        self.owed_since: dict[str, float] = {}
        self.held_gpu_s = dict.fromkeys(teams, 0.0)
        self.fair_gpu_s = dict.fromkeys(teams, 0.0)
        self.below_s = dict.fromkeys(teams, 0.0)
        self.longest_below_s = dict.fromkeys(teams, 0.0)
        self.preemptions = dict.fromkeys(teams, 0)
        self.moves = dict.fromkeys(teams, 0)
        self.victims_within_share = dict.fromkeys(teams, 0)
        self.quick_restarts = dict.fromkeys(teams, 0)
        self.lost_gpu_s = dict.fromkeys(teams, 0.0)
        self.lost_split = dict.fromkeys(LOSSES, 0.0)
        self.reclaim_waits: list[float] = []
        finite = math.isfinite(self.w1)
        self.bin_s = max(BIN_S, (self.w1 - self.w0) / MAX_BINS) if finite else math.inf
        bins = max(1, math.ceil((self.w1 - self.w0) / self.bin_s)) if finite else 1
        self.held_bins = np.zeros((len(teams), bins))
        self.demand_bins = np.zeros((len(teams), bins))
        self.fair_bins = np.zeros((len(teams), bins))
        weeks = max(1, math.ceil((self.w1 - self.w0) / WEEK_S)) if finite else 1
        self.week_s = WEEK_S if finite else math.inf
        self.surplus_gpu_s = np.zeros((len(teams), weeks))  # GPU-seconds held beyond the quota, per week
        self._quota = np.array([quotas[t] for t in teams], dtype=float)
        self._index = {team: i for i, team in enumerate(teams)}

    @property
    def span_s(self) -> float:
        return max(0.0, min(self.w1, self.t or self.w0) - self.w0)

    def advance(self, t: float) -> None:
        """Time passes to `t` with nothing changing."""
        self.fair_now()
        if self.t is not None:
            lo, hi = max(self.t, self.w0), min(t, self.w1)
            if hi > lo:
                dt = hi - lo
                for team in self.teams:
                    self.held_gpu_s[team] += self.held[team] * dt
                    self.fair_gpu_s[team] += self.fair[team] * dt
                for team in self.owed:
                    self.below_s[team] += dt
                self._bin(lo, hi)
        self.t = t

    def _bin(self, lo: float, hi: float) -> None:
        held = np.array([self.held[t] for t in self.teams], dtype=float)
        demand = np.array([self.demand[t] for t in self.teams], dtype=float)
        fair = np.array([self.fair[t] for t in self.teams], dtype=float)
        for b, seconds in self._spans(lo, hi, self.bin_s, self.held_bins.shape[1]):
            self.held_bins[:, b] += held * seconds
            self.demand_bins[:, b] += demand * seconds
            self.fair_bins[:, b] += fair * seconds
        surplus = np.maximum(0.0, held - self._quota)
        for w, seconds in self._spans(lo, hi, self.week_s, self.surplus_gpu_s.shape[1]):
            self.surplus_gpu_s[:, w] += surplus * seconds

    def _spans(self, lo: float, hi: float, width: float, count: int):
        """(bin, seconds) of `[lo, hi)` in each of `count` bins of `width` from the window's start."""
        b = int((lo - self.w0) // width) if math.isfinite(width) else 0
        while lo < hi and b < count:
            end = min(hi, self.w0 + (b + 1) * width)
            yield b, end - lo
            lo, b = end, b + 1

    def held_changed(self, team: str, delta: int) -> None:
        self.held[team] += delta

    def demand_changed(self, team: str, delta: int) -> None:
        self.demand[team] += delta
        self._shares_stale = True

    def after_round(self, t: float, owed: set[str]) -> None:
        for team in owed - self.owed:
            self.owed_since[team] = t
        for team in self.owed - owed:
            self._close_episode(team, t)
        self.owed = set(owed)

    def fair_now(self) -> dict[str, int]:
        return self.shares_now().fair

    def shares_now(self) -> Shares:
        """What each team is owed on the demand now (`team_shares`), recomputed when it changed."""
        if self._shares_stale:
            self.shares = team_shares(self.quotas, self.demand, self.capacity)
            self.fair = self.shares.fair
            self._shares_stale = False
        return self.shares

    def stopped(self, t: float, team: str, moved: bool, within_share: bool) -> None:
        """A preemption or move; `within_share`: the victim's team held no more than
        its fair share before the round (a sign of churn, not a rule of any policy)."""
        if self.w0 <= t < self.w1:
            (self.moves if moved else self.preemptions)[team] += 1
            self.victims_within_share[team] += within_share

    def restarted_soon(self, t: float, team: str) -> None:
        """A preempted job started again within two rounds: the preemption bought little."""
        if self.w0 <= t < self.w1:
            self.quick_restarts[team] += 1

    def lost(self, t: float, team: str, gpu_s: float, kind: str) -> None:
        """GPU-seconds lost to a preemption or move, of a kind of `LOSSES`: work thrown away
        since the checkpoint and time spent saving (when the victim leaves), restart time
        (when the restarted run ends)."""
        if self.w0 <= t < self.w1:
            self.lost_gpu_s[team] += gpu_s
            self.lost_split[kind] += gpu_s

    def reclaim_waited(self, placed: float, seconds: float) -> None:
        """A job placed at `placed` on GPUs that stopped jobs were leaving began `seconds` later."""
        if self.w0 <= placed < self.w1:
            self.reclaim_waits.append(seconds)

    def close(self, t: float) -> None:
        self.advance(t)
        for team in self.owed:
            self._close_episode(team, t)
        self.owed = set()

    def _close_episode(self, team: str, t: float) -> None:
        since = self.owed_since.pop(team)
        length = min(t, self.w1) - max(since, self.w0)
        self.longest_below_s[team] = max(self.longest_below_s[team], length)


@dataclass
class Stats:
    """Mean, median and 95th percentile of a list of seconds (None when empty)."""

    mean: float | None
    p50: float | None
    p95: float | None

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        if not values:
            return cls(None, None, None)
        a = np.asarray(values, dtype=float)
        return cls(float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 95)))


@dataclass
class MeanWorst:
    """Mean and largest of a list of errors (None when empty)."""

    mean: float | None
    worst: float | None

    @classmethod
    def of(cls, values: list[float]) -> MeanWorst:
        return cls(float(np.mean(values)), max(values)) if values else cls(None, None)


@dataclass
class TeamMetrics:
    quota: int
    jobs: int                     # measured jobs (arrived in the window)
    finished: int
    unstarted: int                # never started by the end of the run
    utilization: float            # the team's GPU-hours / the cluster's capacity x window
    mean_gpus: float              # time-averaged GPUs held
    mean_fair_share: float        # time-averaged fair share
    guarantee_share: float | None  # None for teams without a quota
    longest_below_guarantee_s: float | None
    preemptions: int
    moves: int
    lost_gpu_hours: float
    queueing: Stats
    jct: Stats
    surplus_gpu_h: list[float] = field(default_factory=list)  # GPU-hours held beyond the quota, per week

    @property
    def allocation_to_fair_share(self) -> float | None:
        return self.mean_gpus / self.mean_fair_share if self.mean_fair_share > 0 else None

    @property
    def entitlement_error(self) -> float | None:
        """|GPU-hours received - GPU-hours of its fair share| / the latter; None for a team
        whose fair share was 0 throughout (it had no demand)."""
        ratio = self.allocation_to_fair_share
        return None if ratio is None else abs(ratio - 1)


@dataclass
class Borrowed:
    """A team that borrowed heavily in the first measured week (`HEAVY_BORROWING`): the
    GPU-hours it held beyond its quota in that week and in the next (None: the window
    ends within the first week)."""

    first_week_gpu_h: float
    second_week_gpu_h: float | None


@dataclass
class PolicyMetrics:
    policy: str
    utilization: float
    guarantee_share: float | None          # the worst team's
    longest_below_guarantee_s: float | None  # the longest of any team
    jain: float | None
    preemptions: int
    moves: int
    lost_gpu_hours: float
    lost_split: dict[str, float]  # GPU-hours lost by kind (LOSSES)
    reclaim_wait: Stats           # seconds from the plan to the start, of jobs placed where victims were leaving
    victims_within_share: int     # preempted while their team held no more than its fair share
    quick_restarts: int           # preempted jobs started again within two rounds
    queueing: Stats
    jct: Stats
    jobs: int
    finished: int
    unstarted: int
    teams: dict[str, TeamMetrics]
    rounds: int
    end_s: float
    entitlement_error: MeanWorst = field(default_factory=lambda: MeanWorst(None, None))  # over teams with demand
    borrowed_heavily: dict[str, Borrowed] = field(default_factory=dict)
    horizon_reached: bool = False           # stopped by the drain limit with jobs unfinished
    policy_stats: dict = field(default_factory=dict)
    held_bins: np.ndarray | None = None     # mean GPUs per team per time bin of the window
    demand_bins: np.ndarray | None = None
    fair_bins: np.ndarray | None = None     # mean fair share (past usage not counted)
    bin_s: float = BIN_S


def measure(run) -> PolicyMetrics:
    """The metrics of one finished `SimRun`."""
    led: Ledger = run.ledger
    w0, w1 = run.config.window
    span = led.span_s or 1.0
    measured = [j for j in run.jobs if w0 <= j.spec.arrival_s < w1]
    teams = {team: _team_metrics(led, team, [j for j in measured if j.team == team], span, run.end_s)
             for team in led.teams}
    with_quota = [t for t in teams.values() if t.guarantee_share is not None]
    widths = _bin_widths(led)
    return PolicyMetrics(
        policy=run.policy,
        utilization=sum(led.held_gpu_s.values()) / (led.capacity * span),
        guarantee_share=min((t.guarantee_share for t in with_quota), default=None),
        longest_below_guarantee_s=max((t.longest_below_guarantee_s for t in with_quota), default=None),
        jain=jain([t.allocation_to_fair_share for t in _with_demand(teams)]),
        entitlement_error=MeanWorst.of([t.entitlement_error for t in _with_demand(teams)]),
        borrowed_heavily=borrowed_heavily(led),
        preemptions=sum(led.preemptions.values()), moves=sum(led.moves.values()),
        lost_gpu_hours=sum(led.lost_gpu_s.values()) / 3600,
        lost_split={kind: gpu_s / 3600 for kind, gpu_s in led.lost_split.items()},
        reclaim_wait=Stats.of(led.reclaim_waits),
        victims_within_share=sum(led.victims_within_share.values()), quick_restarts=sum(led.quick_restarts.values()),
        queueing=Stats.of([queueing_s(j, run.end_s) for j in measured]),
        jct=Stats.of([j.finish - j.spec.arrival_s for j in measured if j.finish is not None]),
        jobs=len(measured), finished=sum(j.finish is not None for j in measured),
        unstarted=sum(j.first_start is None for j in measured),
        teams=teams, rounds=run.rounds, end_s=run.end_s, horizon_reached=run.horizon_reached,
        policy_stats=dict(run.policy_stats),
        held_bins=led.held_bins / widths, demand_bins=led.demand_bins / widths, fair_bins=led.fair_bins / widths,
        bin_s=led.bin_s,
    )


def _with_demand(teams: dict[str, TeamMetrics]) -> list[TeamMetrics]:
    """The teams whose fair share was above 0 some of the time: those with demand."""
    return [t for t in teams.values() if t.mean_fair_share > 0]


def borrowed_heavily(led: Ledger) -> dict[str, Borrowed]:
    """The teams that held beyond their quota, over the first measured week, at least
    `HEAVY_BORROWING` of the cluster's GPUs on average, with what they held beyond it then
    and in the second week."""
    first = min(led.week_s, led.w1 - led.w0)
    out = {}
    for i, team in enumerate(led.teams):
        weeks = led.surplus_gpu_s[i]
        if weeks[0] >= HEAVY_BORROWING * led.capacity * first:
            out[team] = Borrowed(weeks[0] / 3600, weeks[1] / 3600 if len(weeks) > 1 else None)
    return out


def _team_metrics(led: Ledger, team: str, own: list, span: float, end_s: float) -> TeamMetrics:
    """One team's metrics: `own` its measured jobs, `span` the measured seconds."""
    quota = led.quotas[team]
    return TeamMetrics(
        quota=quota, jobs=len(own), finished=sum(j.finish is not None for j in own),
        unstarted=sum(j.first_start is None for j in own),
        utilization=led.held_gpu_s[team] / (led.capacity * span),
        mean_gpus=led.held_gpu_s[team] / span, mean_fair_share=led.fair_gpu_s[team] / span,
        guarantee_share=1 - led.below_s[team] / span if quota else None,
        longest_below_guarantee_s=led.longest_below_s[team] if quota else None,
        preemptions=led.preemptions[team], moves=led.moves[team],
        lost_gpu_hours=led.lost_gpu_s[team] / 3600,
        queueing=Stats.of([queueing_s(j, end_s) for j in own]),
        jct=Stats.of([j.finish - j.spec.arrival_s for j in own if j.finish is not None]),
        surplus_gpu_h=[float(x) / 3600 for x in led.surplus_gpu_s[led.teams.index(team)]],
    )


def queueing_s(job, end_s: float) -> float:
    """Every second the job waited: before its first start and after each
    preemption. A job still waiting at the end counts until the end."""
    return job.waited_s + (end_s - job.wait_since if job.wait_since is not None and job.finish is None else 0.0)


def jain(values: list[float]) -> float | None:
    """Jain's fairness index: 1 when all values are equal, 1/n at worst."""
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return float(a.sum() ** 2 / (len(a) * (a ** 2).sum())) if (a ** 2).sum() > 0 else None


def _bin_widths(led: Ledger) -> np.ndarray:
    """Seconds of each bin the run covered (the last bin may be cut short)."""
    if not math.isfinite(led.bin_s):
        return np.array([max(led.span_s, 1e-9)])
    edges = np.minimum(led.w0 + led.bin_s * np.arange(led.held_bins.shape[1] + 1), led.w1)
    return np.maximum(np.diff(edges), 1e-9)
