"""The queue rules in the program: what each queue holds after the plan, limits,
non-preemptible work within deserved, guarantees and fair share (with claims before
borrowing). Reclaim is in `gpu_policy.planner.reclaim`, priority inside a queue in
`gpu_policy.planner.inside`.

Every bound comes from `gpu_policy.planner.rules`; this module only writes them as
linear rows. A row's comment states it in math before it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpu_policy.model import Job, Scenario
from gpu_policy.planner import rules
from gpu_policy.planner.program import PlanProgram, affine, most
from gpu_policy.planner.scope import Standing


@dataclass
class Accounts:
    """Per leaf queue, what it holds after the plan as (terms, constant): kept or moved
    running jobs, and started jobs."""

    kept: dict[str, tuple[dict, float]] = field(default_factory=dict)
    new: dict[str, dict] = field(default_factory=dict)
    jobs: dict[str, list[Job]] = field(default_factory=dict)  # leaf -> its jobs

    def held(self, leaves: list[str]) -> tuple[dict, float]:
        terms: dict = defaultdict(float)
        const = 0.0
        for q in leaves:
            t, c = self.kept[q]
            for v, a in list(t.items()) + list(self.new[q].items()):
                terms[v] += a
            const += c
        return dict(terms), const


def accounts(m: PlanProgram, s: Scenario, st: Standing) -> Accounts:
    out = Accounts()
    for q in st.tree.leaves:
        out.jobs[q] = []
        out.kept[q] = ({}, 0.0)
        out.new[q] = {}
    for kind, var in m.starts.items():
        out.new[kind.queue][var] = kind.total_gpus
    for job in s.jobs:
        out.jobs[job.queue].append(job)
        if job.is_running:
            terms, const = out.kept[job.queue]
            runs, once = m.runs(job)
            for v, a in runs.items():
                terms[v] = terms.get(v, 0) + a * job.total_gpus
            out.kept[job.queue] = (terms, const + once * job.total_gpus)
    return out


def limits_and_nonpreemptible(m: PlanProgram, st: Standing, acc: Accounts) -> None:
    for e in st.tree.parent:
        leaves = st.tree.leaves_under(e)
        terms, const = acc.held(leaves)
        bound = rules.limit_bound(st.shares, e, st.held[e])
        if bound is not None and terms:
            # allocated_after[e] <= max(limit[e], allocated_before[e])
            m.add(affine(terms, const) <= bound, "limit")
        mine = set(leaves)
        pinned = m.started(lambda k: k.queue in mine and not k.preemptible)
        if pinned:
            before = st.held_nonpreemptible[e]
            # non-preemptible GPUs of e after <= max(deserved[e], non-preemptible GPUs of e before)
            m.add(affine(pinned, before) <= rules.nonpreemptible_bound(st.shares, e, before), "nonpreemptible")


@dataclass
class Credit:
    """What of a queue counts toward its shares (terms, constant), and of that, its starts."""

    terms: dict
    const: float
    claimed: dict  # {starts or their counted part: GPUs}


def credits(m: PlanProgram, st: Standing, acc: Accounts) -> dict[str, Credit]:
    return {q: _credit(m, st, acc, q) for q in st.tree.leaves}


def shortfalls(m: PlanProgram, st: Standing, acc: Accounts, credit: dict[str, Credit]) -> list[tuple[str, dict]]:
    """Stages `guarantees` then `fair_share` (one per depth of the queue tree, top first):
    the GPUs each entity lacks to min(deserved, demand), then to its fair share.

    Claims before borrowing: a start counts toward its queue's shares only if the queue,
    counting it, stays within its fair share (credit[q] below), so a start that takes its
    queue above its fair share serves no claim, and the earlier stages keep the GPUs that
    a claim could use for the claim.
    """
    plain = {q: (c.terms, c.const) for q, c in credit.items()}
    guarantee = {q: _guarantee_credit(m, st, acc, q, plain[q]) for q in st.tree.leaves}
    stages = []
    depths = sorted({st.tree.depth(e) for e in st.tree.parent})
    for name, target in (("guarantees", st.shares.guarantee), ("fair_share", st.shares.fair)):
        for depth in depths:
            objective: dict = {}
            for e in st.tree.parent:
                if st.tree.depth(e) != depth or target[e] <= rules.EPS:
                    continue
                terms: dict = defaultdict(float)
                const = 0.0
                for q in st.tree.leaves_under(e):
                    t, c = (guarantee if name == "guarantees" else plain)[q]
                    for v, a in t.items():
                        terms[v] += a
                    const += c
                if not terms:
                    continue
                short = m.var("short", 0)
                terms[short] = 1
                # short[e] >= target[e] - credit[e]
                m.add(affine(terms, const) >= target[e], "short")
                objective[short] = 1
            if objective:
                stages.append((name if depth == depths[0] else f"{name}_depth{depth}", objective))
    return stages


def _guarantee_credit(m: PlanProgram, st: Standing, acc: Accounts, q: str,
                      credit: tuple[dict, float]) -> tuple[dict, float]:
    """In the guarantee stages a queue that gives also counts its largest victim: jobs are
    indivisible, and the floor rule lets the last victim take it below its guarantee. Never
    more than it counted before the plan: giving cannot raise a queue's own credit."""
    largest = m.largest.get(q)
    if not largest:
        return credit
    terms, const = credit
    cap = max(st.shares.fair[q], st.shares.guarantee[q])
    before = rules.best_fill([j.total_gpus for j in acc.jobs[q] if j.is_running], cap)
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
    if low >= fair - rules.EPS:
        return Credit({}, float(fair), {})
    if const + sum(max(0.0, a) for a in kept.values()) + most(new) <= fair + rules.EPS:
        return Credit({**kept, **new}, const, dict(new))  # everything fits within the share
    counted = m.var("kept_counted", 0, fair)
    # kept_counted[q] <= what q keeps
    m.add(affine({counted: 1, **{v: -a for v, a in kept.items()}}, -const) <= 0, "counted")
    claimed = {}
    for kind, var in m.starts.items():
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
