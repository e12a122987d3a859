"""Which victim goes first: the one order every part of the planner uses, and the program's
preemption stages. A victim's cost (`victim_cost`) is its tier, then the work it loses in
whole GPU-minutes (`lost_work`: the contract's "Lost work" and "Waiting for a checkpoint", one
home for both); the program has one preemption stage per tier (`preemption_stages`, costing
each victim by `victim_costs`), the moves stage costs moves the same way, and the greedy
scope ranks candidate nodes by the `total_cost` of their victims (built one victim at a time
with `add_cost`), all built on `victim_cost`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import pulp

from gpu_policy.model import EPS, Job
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.context import Accounts, PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.rule import Rule, Stage
from gpu_policy.planner.core.scope import Standing
from gpu_policy.planner.core.telemetry import GpuLimits


#: Seconds a victim that saves on request needs to save, where it does not say (the contract's).
DEFAULT_SAVE_S = 60.0


class Loss(NamedTuple):
    """What preempting or moving one job loses."""

    gpu_seconds: float           # its GPUs times the work lost, or the seconds they idle while it saves
    evict_after_s: float | None  # stopped at its periodic checkpoint, due in this many seconds (None: now)


def checkpoint_due(job: Job) -> float | None:
    """Seconds until the job's next periodic checkpoint (None: unknown): its interval less the
    work since its last one, modulo the interval."""
    if not job.checkpoint_every_s or job.checkpoint_age_s is None:
        return None
    return job.checkpoint_every_s - job.checkpoint_age_s % job.checkpoint_every_s


def save_seconds(job: Job) -> float:
    """How long a job that saves on request saves for: its `save_s`, else `DEFAULT_SAVE_S`."""
    return job.save_s if job.save_s is not None else DEFAULT_SAVE_S


def lost_work(job: Job, default_age_s: float, reclaim_wait_s: float = 0.0) -> Loss:
    """What preempting or moving `job` loses, per its GPUs: a job that saves on request is asked
    to checkpoint first and loses the seconds it saves (`save_s`, else `DEFAULT_SAVE_S`), not
    its progress; one whose periodic checkpoint is due within `reclaim_wait_s` is stopped then
    and loses nothing; any other loses the work since its last checkpoint (an unknown age
    counts as `default_age_s`)."""
    if job.saves_on_request:
        return Loss(job.total_gpus * save_seconds(job), None)
    due = checkpoint_due(job)
    if reclaim_wait_s > 0 and due is not None and due <= reclaim_wait_s:
        return Loss(0.0, due)
    age = job.checkpoint_age_s if job.checkpoint_age_s is not None else default_age_s
    return Loss(job.total_gpus * age, None)


def idle_victim(job: Job, idle_jobs: Mapping[str, float], held: Mapping[str, float],
                fair: Mapping[str, float]) -> bool:
    """An idle job (DCGM telemetry) of a queue above its fair share (by more than `EPS`, as
    every rule compares GPU amounts): the first victim."""
    return job.name in idle_jobs and held[job.queue] > fair[job.queue] + EPS


def victim_tier(job: Job, idle: bool) -> tuple[int, int]:
    """Which victims go first, before any cost: idle jobs of queues above their share, then
    the lowest priority. The program has one preemption stage per tier (highest first, so
    the lowest tier goes first)."""
    return (0, 0) if idle else (1, job.priority)


class VictimCost(NamedTuple):
    """What preempting one victim costs, compared field by field."""

    tier: tuple[int, int]  # victim_tier
    minutes: int           # lost work (lost_work) in whole GPU-minutes: plans losing the same work tie
    frees_in_s: float      # seconds until its GPUs are free (`frees_in`): among ties, the soonest first


def frees_in(job: Job, loss: Loss) -> float:
    """Seconds until a victim's GPUs are free for the job that takes them: the save of one that
    saves on request, the checkpoint a deferred one is stopped at, else none (it is evicted at
    once). Among victims that lose the same work, the one that frees its GPUs soonest goes, so
    that the claimant waits least."""
    if job.saves_on_request:
        return save_seconds(job)
    return loss.evict_after_s or 0.0


def victim_cost(job: Job, default_age_s: float, idle: bool = False, reclaim_wait_s: float = 0.0) -> VictimCost:
    """The cost of preempting (or moving: `idle` does not matter there) `job`, as the
    program's stages and the greedy scope's rankings both count it."""
    loss = lost_work(job, default_age_s, reclaim_wait_s)
    return VictimCost(victim_tier(job, idle), round(loss.gpu_seconds / 60), frees_in(job, loss))


def victim_order_key(job: Job, cost: VictimCost) -> tuple:
    """Among valid victims: the lowest cost (`victim_cost`: tier, lost work, then how soon its
    GPUs are free), then the most recently submitted (as the program breaks ties)."""
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


def victim_costs(victims: list[Job], cfg: PlannerConfig, reclaim_wait_s: float = 0.0) -> dict[str, float]:
    """Cost of preempting (or moving) each victim in the program's stages: its
    `victim_cost` minutes, so that a plan's victims lose the least work in all, and plans
    losing the same work tie; plus less than one GPU-minute over all victims that prefers
    fewer victims, then those whose GPUs are free soonest, then the most recently submitted."""
    if not victims:
        return {}
    n = len(victims)
    cost = {j.name: victim_cost(j, cfg.default_checkpoint_age_s, reclaim_wait_s=reclaim_wait_s) for j in victims}
    order = sorted(victims, key=lambda j: (cost[j.name].frees_in_s, -j.submitted_at, j.name))
    rank = {j.name: r for r, j in enumerate(order)}
    return {j.name: cost[j.name].minutes + (1 + rank[j.name] / n) / (2 * n + 2) for j in victims}


def preemption_stages(m: PlanProgram, acc: Accounts, st: Standing, cfg: PlannerConfig, limits: GpuLimits,
                      part: str, reclaim_wait_s: float = 0.0) -> list[tuple[str, pulp.LpAffineExpression]]:
    """`part`: "cross" (victims given to other queues: solved before priority inside a
    queue) or "inside" (victims of a queue's own higher-priority work: after it)."""
    victims = [j for j in acc.candidates
               if j.name in m.decisions.victims and (part == "cross" or j.name in m.flows.inside)]
    cost = victim_costs(victims, cfg, reclaim_wait_s)
    tier = {j.name: victim_tier(j, idle_victim(j, limits.idle_jobs, st.held, st.shares.fair)) for j in victims}
    stages = []
    for key in sorted(set(tier.values()), reverse=True):
        terms: dict = defaultdict(float)
        const = 0.0
        for j in victims:
            if tier[j.name] == key:
                t, c = m.preempted(j, part)
                for var, a in t.items():
                    terms[var] += a * cost[j.name]
                const += c * cost[j.name]
        label = "idle" if key[0] == 0 else f"p{key[1]}"
        stages.append((f"preemption_{label}" if part == "cross" else f"preemption_inside_{label}",
                       affine(terms, const)))
    return stages


class Victims(Rule):
    """Which victim goes first: what a victim costs (for the scope's rankings too), the
    preemption stages, for other queues before priority inside a queue, and inside a queue
    after it."""

    name = "victims"
    #: Where its stages rank: preemptions for other queues after fair share, those inside a
    #: queue after the priority stages.
    PREEMPTION, PREEMPTION_INSIDE = 30, 50

    def stages(self, ctx: PlanContext) -> list[Stage]:
        def part(which: str):
            return lambda: preemption_stages(ctx.m, ctx.accounts, ctx.standing, ctx.config, ctx.limits, which,
                                             self.reclaim_wait_s)
        return [Stage(self.PREEMPTION, part("cross")), Stage(self.PREEMPTION_INSIDE, part("inside"))]

    @property
    def reclaim_wait_s(self) -> float:
        return self.inputs.scenario.policy.reclaim_wait_s

    def cost(self, victim: Job, st: Standing, limits: GpuLimits) -> VictimCost:
        """`victim_cost`, idle jobs of queues above their share first."""
        idle = idle_victim(victim, limits.idle_jobs, st.held, st.shares.fair)
        return victim_cost(victim, self.inputs.config.default_checkpoint_age_s, idle, self.reclaim_wait_s)

    def loss(self, job: Job) -> Loss:
        """`lost_work`, with the plan's default age and the policy's `reclaim_wait_s`."""
        return lost_work(job, self.inputs.config.default_checkpoint_age_s, self.reclaim_wait_s)

    def lost(self, job: Job) -> float:
        return self.loss(job).gpu_seconds

    def report(self, changes: list, jobs: Mapping[str, Job]) -> list:
        """A preemption or move at a victim's due checkpoint says when (`evict_after_s`)."""
        if self.reclaim_wait_s > 0:
            victims = {job.name: job for job in self.inputs.scenario.jobs if job.running}
            for d in changes:
                if d.stops:
                    d.evict_after_s = self.loss(victims[d.name]).evict_after_s
        return []

    def preempt_clause(self, job: Job, judged: Judged) -> str | None:
        """What put a preempted job first among the victims, and what it loses: it was idle
        (DCGM telemetry), it saves when asked, or it stops at its checkpoint due soon."""
        idle_s = judged.limits.idle_jobs.get(job.name)
        loss = self.loss(job)
        said = [f"idle for {idle_s / 60:.0f} min"] if idle_s is not None else []
        if job.saves_on_request:
            said.append(f"it is asked to checkpoint first and saves in about "
                        f"{save_seconds(job):g} s")
        elif loss.evict_after_s is not None:
            said.append(f"it stops at its periodic checkpoint, due in {loss.evict_after_s:.0f} s, and loses nothing")
        return "; ".join(said) or None
