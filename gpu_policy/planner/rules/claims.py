"""Claims before borrowing and who starts first: the guarantee tier before fair share,
then the smallest relative share; how much of a queue's work counts toward its share.

In the program: what of each queue's holdings after the plan counts toward its shares
(`credits`: claims before borrowing, which the rules after it read), the guarantee and
fair-share stages (`shortfalls`) and the starts stage."""

from __future__ import annotations

import math
from collections import defaultdict

import pulp

from gpu_policy.model import EPS, Job
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.context import Accounts, Credit, PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine, common_step, most
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.queues import GUARANTEE, QueueTree, Shares, cap
from gpu_policy.planner.core.rule import Rule, Stage
from gpu_policy.planner.core.scope import Standing


def relative_share(allocated: float, gpus: float, deserved: float, fair: float) -> float:
    """Who starts first among tied plans: the smallest (allocated + the job's GPUs) /
    max(deserved, fair share)."""
    base = max(deserved, fair)
    return (allocated + gpus) / base if base > EPS else float("inf")


def start_order(tree: QueueTree, shares: Shares, held: dict[str, float], waiting: list[Job]) -> list[Job]:
    """Who starts first. Inside a queue: higher priority, then older. Across queues: work
    that keeps its queue within its guarantee, then within its fair share, then the
    smallest relative share (departments compared first, then the queues inside them),
    then higher priority, then older (submitted_at), then the name."""
    by_queue: dict[str, list[Job]] = {}
    for job in sorted(waiting, key=lambda j: (-j.priority, j.submitted_at, j.name)):
        by_queue.setdefault(job.queue, []).append(job)
    keyed = []
    for q, jobs in by_queue.items():
        top_down = list(reversed(tree.path(q)))
        ahead = 0.0
        for job in jobs:
            after = held[q] + ahead + job.total_gpus
            shares_key = tuple(relative_share(held[e] + ahead, job.total_gpus, shares.deserved[e], shares.fair[e])
                               for e in top_down)
            keyed.append(((after > shares.guarantee[q] + EPS, after > shares.fair[q] + EPS, shares_key,
                           -job.priority, job.submitted_at, job.name), job))
            ahead += job.total_gpus
    return [job for _, job in sorted(keyed, key=lambda x: x[0])]


def best_fill(amounts: list[float], share: float) -> float:
    """The most GPUs a set of jobs of these sizes holds without going above `share` (jobs are
    indivisible): how much of a queue's work counts toward its share."""
    milli = [round(a * 1000) for a in amounts if a > EPS]
    limit = round(share * 1000)
    if sum(milli) <= limit:
        return sum(milli) / 1000
    unit = math.gcd(*milli)
    reach, mask = 1, (1 << (limit // unit + 1)) - 1  # bit k: some subset sums to k units
    for a in milli:
        reach |= (reach << (a // unit)) & mask
    return (reach.bit_length() - 1) * unit / 1000


def credits(m: PlanProgram, st: Standing, acc: Accounts) -> dict[str, Credit]:
    return {q: _credit(m, st, acc, q) for q in st.tree.leaves}


def shortfalls(m: PlanProgram, st: Standing, acc: Accounts, credit: dict[str, Credit],
               name: str) -> list[tuple[str, pulp.LpAffineExpression]]:
    """Stages `guarantees` or `fair_share` (`name`; one per depth of the queue tree, top
    first): the GPUs each entity lacks to min(deserved, demand), or to its fair share.

    Claims before borrowing: a start counts toward its queue's shares only if the queue,
    counting it, stays within its fair share (credit[q] below), so a start that takes its
    queue above its fair share serves no claim, and the earlier stages keep the GPUs that
    a claim could use for the claim.
    """
    counted = {q: (c.terms, c.const) for q, c in credit.items()}
    if name == "guarantees":
        counted = {q: _guarantee_credit(m, st, acc, q, counted[q]) for q in st.tree.leaves}
    target = st.shares.guarantee if name == "guarantees" else st.shares.fair
    depths = sorted({st.tree.depth(e) for e in st.tree.parent})
    stages = []
    for depth in depths:
        shorts = [_short(m, st, counted, e, target[e]) for e in st.tree.parent
                  if st.tree.depth(e) == depth and target[e] > EPS]
        objective = {short: 1 for short in shorts if short is not None}
        if objective:
            stages.append((name if depth == depths[0] else f"{name}_depth{depth}", affine(objective)))
    return stages


def _short(m: PlanProgram, st: Standing, counted: dict[str, tuple[dict, float]], e: str, target: float):
    """The GPUs entity e lacks to `target`, counting its leaves' credit (None: it has no
    variable credit, so nothing to decide)."""
    terms: dict = defaultdict(float)
    const = 0.0
    for q in st.tree.leaves_under(e):
        t, c = counted[q]
        for v, a in t.items():
            terms[v] += a
        const += c
    if not terms:
        return None
    short = m.var("short", 0)
    terms[short] = 1
    # short[e] >= target[e] - credit[e]
    m.add(affine(terms, const) >= target, "short")
    return short


def _guarantee_credit(m: PlanProgram, st: Standing, acc: Accounts, q: str,
                      credit: tuple[dict, float]) -> tuple[dict, float]:
    """In the guarantee stages a queue that gives also counts its largest victim: jobs are
    indivisible, and the floor rule lets the last victim take it below its guarantee. Never
    more than it counted before the plan: giving cannot raise a queue's own credit."""
    largest = m.flows.largest.get(q)
    if not largest:
        return credit
    terms, const = credit
    share = max(st.shares.fair[q], st.shares.guarantee[q])
    before = best_fill(acc.running[q], share)
    counted = m.var("guarantee_credit", 0, before)
    # guarantee_credit[q] <= credit[q] + largest[q],  and <= its credit before the plan
    m.add(affine({counted: 1, **{v: -a for v, a in terms.items()},
                  **{z: -size for size, z in largest.items()}}, -const) <= 0, "guarantee_credit")
    return {counted: 1}, 0.0


def _credit(m: PlanProgram, st: Standing, acc: Accounts, q: str) -> Credit:
    """GPUs of q that count toward its shares: what runs after the plan, up to its fair
    share, plus its claims: starts of a set that fits, whole, on top of what runs within
    the share (jobs are indivisible: a start that takes the queue above its share serves
    no claim). kept_counted <= kept, <= fair; kept + claimed <= fair when anything is
    claimed."""
    fair = st.shares.fair[q]
    kept, const = acc.kept[q]
    new = acc.new[q]
    low = const + sum(min(0.0, a) for a in kept.values())  # the least q keeps
    if low >= fair - EPS:
        return Credit({}, float(fair), {})
    if const + sum(max(0.0, a) for a in kept.values()) + most(new) <= fair + EPS:
        return Credit({**kept, **new}, const, dict(new))  # everything fits within the share
    counted = m.var("kept_counted", 0, fair)
    # kept_counted[q] <= what q keeps
    m.add(affine({counted: 1, **{v: -a for v, a in kept.items()}}, -const) <= 0, "counted")
    claimed = {}
    for kind, var in m.decisions.starts.items():
        if kind.queue == q:
            c = m.var("claimed", 0, var.upBound, "Integer", 0)
            claimed[c] = kind.total_gpus
            # claimed[k] <= starts[k]
            m.add(affine({c: 1, var: -1}) <= 0, "claimed")
    any_claim = m.binary("claims", 0)
    # claimed GPUs <= big * claims[q];  kept[q] + claimed GPUs <= fair[q] + big * (1 - claims[q])
    m.add(affine({**claimed, any_claim: -most(claimed)}) <= 0, "claims")
    big = const + most(kept) + most(claimed)
    m.add(affine({**kept, **claimed, any_claim: big}, const) <= fair + big, "claims")
    return Credit({counted: 1, **claimed}, 0.0, claimed)


def starts_stage(m: PlanProgram, ordered: list[Job]) -> pulp.LpAffineExpression:
    """Maximise GPUs started; the rank in start order breaks ties (`start_tie`). The k-th job
    of a kind is worth its rank's value: kind k starting n jobs earns its first n values, one
    continuous segment per job (starts[k] = sum of its segments; their values fall, so the
    best fill first)."""
    rank = {j.name: r for r, j in enumerate(ordered)}
    jobs = [j for mine in m.decisions.kinds.values() for j in mine]
    n = len(jobs)
    tie = start_tie(jobs)
    objective = {}
    for kind, var in m.decisions.starts.items():
        segments = {}
        for job in m.decisions.kinds[kind]:
            segment = m.var("rank", 0, 1)
            segments[segment] = 1
            objective[segment] = -(job.total_gpus + tie * (n - rank[job.name]) / n)
        # starts[k] = sum of its segments
        m.add(affine({**segments, var: -1}) == 0, "segments")
    return affine(objective)


def start_tie(jobs: list[Job]) -> float:
    """The tie value of the first rank in start order (rank r of n earns tie x (n - r) / n):
    half the step d by which two plans' GPUs started can differ, over n + 1, so that all of
    a plan's ties add up to less than d / 2 and GPUs started always come first. As large as
    that allows, so that the solver, which proves optima to 1e-6, tells start sets apart
    whose ranks differ by d / (2 n (n + 1)) or more: ranks 2 apart at n = 1,000 jobs of whole
    GPUs, 8 apart at 2,000 (a thousandth of the smallest job, as before, needed 1,000 ranks
    at 1,000 jobs, and HiGHS picked between such start sets by its search path). Where GPUs
    have no common step, a thousandth of the smallest job."""
    step = common_step(j.total_gpus for j in jobs)
    if step is None:
        return 1e-3 * min(j.total_gpus for j in jobs) / (len(jobs) + 1)
    return step / (2 * (len(jobs) + 1))


class Claims(Rule):
    """Claims before borrowing: what counts toward each queue's shares (its variables and
    rows, which it hands to the rules after it as `ctx.credits`), the guarantee and
    fair-share stages, and the starts stage."""

    name = "claims"
    codes = {
        "ClaimsBeforeBorrowing": "starting it would take its queue above its fair share, and the free GPUs "
                                 "are claimed by queues within theirs",
        "ClaimsWithinDeserved": "its queue reclaims GPUs in the guarantee tier in this plan, so its starts end "
                                "within its deserved quota",
    }
    #: Where its stages rank among the objectives: guarantees first, then fair share; starts
    #: after the preemption and priority stages.
    GUARANTEES, FAIR_SHARE, STARTS = 10, 20, 60

    def rows(self, ctx: PlanContext) -> None:
        ctx.credits = credits(ctx.m, ctx.standing, ctx.accounts)

    def stages(self, ctx: PlanContext) -> list[Stage]:
        def short(name: str):
            return lambda: shortfalls(ctx.m, ctx.standing, ctx.accounts, ctx.credits, name)
        return [Stage(self.GUARANTEES, short("guarantees")), Stage(self.FAIR_SHARE, short("fair_share")),
                Stage(self.STARTS, lambda: [("starts", starts_stage(ctx.m, ctx.order))])]

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """Claims come first: a queue that reclaims GPUs in the guarantee tier starts only
        within its deserved quota, and a start above a queue's fair share may use only free GPUs
        that no queue within its share could use (with no room free, the room's reason says so)."""
        j, q = judged, job.queue
        room = j.no_room(job)
        if room is None and j.receiving.get(q) == GUARANTEE:
            return self.reason("ClaimsWithinDeserved",
                          f"{q} takes GPUs from other queues in this plan (guarantee tier), so its claims end "
                          f"within its deserved quota of {cap(j.shares, q, GUARANTEE):g}: it holds {j.after[q]:g} "
                          "GPUs after this plan")
        after = j.after[q] + job.total_gpus
        if after <= j.shares.fair[q] + EPS:
            return None
        beyond = (f"{q} holds {j.after[q]:g} GPUs after this plan; with it {after:g}, above its fair share of "
                  f"{j.shares.fair_words(q)}, so it may use only free GPUs that no queue within its share could use")
        return self.reason("ClaimsBeforeBorrowing", beyond) if room is None else room.with_clause(beyond)
