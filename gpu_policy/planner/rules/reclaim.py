"""Reclaim across queues: who may give, who may receive, in which tier, and that each
victim is needed above its queue's floor (the predicates), and the program's rows, judged
on the state after the plan (`reclaim`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from gpu_policy.model import EPS, Job
from gpu_policy.planner.core.codes import Reason, gpu_count
from gpu_policy.planner.core.context import Accounts, Credit, PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine, most
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.queues import FAIR, GUARANTEE, STRICT, TIERS, QueueTree, Shares, cap, floor
from gpu_policy.planner.core.rule import Rule
from gpu_policy.planner.core.scope import Scope, Standing
from gpu_policy.planner.rules.inside import inside_victims

def _taker(j: Judged, receiver: str, tier: str) -> str:
    """Where a receiving entity ends, against its cap in `tier`."""
    limit, after = cap(j.shares, receiver, tier), j.after[receiver]
    if after <= limit + EPS:
        return f"{receiver} ends at {after:g}, within its {_tier_share(j.shares, receiver, tier)}"
    return (f"{receiver} ends at {after:g}: its claims within its {_tier_share(j.shares, receiver, tier)}, "
            "the rest borrowed on GPUs no claim could use")


def _tier_share(shares: Shares, entity: str, tier: str) -> str:
    """'fair share of N' (with what past usage changed) or 'deserved quota of N': what bounds
    `entity` in `tier`."""
    if tier == FAIR:
        return f"fair share of {shares.fair_words(entity)}"
    return f"deserved quota of {shares.deserved[entity]:g}"


def _shutting_down(j: Judged) -> str | None:
    """The pods whose GPUs come back when they exit (evicted or deleted, still shutting down), named."""
    leaving = j.shutting_down
    if not leaving:
        return None
    names = ", ".join(job.name for job in leaving[:3]) + (f" and {len(leaving) - 3} more" if len(leaving) > 3 else "")
    return (f"{gpu_count(sum(job.total_gpus for job in leaving))} are still held by pods shutting down ({names}); "
            f"they are free when those pods exit")


def _no_reclaim(job: Job, j: Judged) -> str:
    q = job.queue
    return (f"{q} would hold {j.after[q] + job.total_gpus:g} GPUs with it, within its fair share of "
            f"{j.shares.fair_words(q)}, but no queue it may reclaim from holds GPUs above its floor where it would "
            f"fit (each victim must be needed above its queue's fair share, or deserved quota)")


def keeps_floor(held_before: float, lost: float, largest: float, floor_: float) -> bool:
    """Each victim is needed above the floor: after losing all its victims but the
    largest, the entity still holds more than its floor."""
    return held_before - (lost - largest) > floor_ + EPS


def may_give(shares: Shares, entity: str, held_before: float, tier: str) -> bool:
    """Could this entity lose any GPU to reclaim in `tier` (one victim at least)?"""
    return held_before > floor(shares, entity, tier) + EPS


def may_receive(shares: Shares, entity: str, held_before: float, gpus: float, tier: str) -> bool:
    """Could this entity take `gpus` more by reclaim in `tier` and end within its cap?"""
    return held_before + gpus <= cap(shares, entity, tier) + EPS


def reclaim_tiers(tree: QueueTree, shares: Shares, held_before: dict[str, float], receiver: str, giver: str,
                  gpus: float) -> list[str]:
    """Tiers in which queue `giver`'s jobs may ever be reclaimed for a `gpus`-GPU job of
    queue `receiver`, judged on the state before the plan (a necessary condition: the
    program then judges the state after it). The receiving queue must have room for the
    job, every entity on the giving side must be above its floor; the receiving side's
    departments are judged after the plan only (they may lose work inside at the same
    time). Empty for the same queue."""
    if receiver == giver:
        return []
    _, up_g = tree.judged(receiver, giver)
    return [tier for tier in TIERS
            if may_receive(shares, receiver, held_before[receiver], gpus, tier)
            and all(may_give(shares, e, held_before[e], tier) for e in up_g)]


def reclaim(m: PlanProgram, st: Standing, acc: Accounts, sc: Scope, credit: dict[str, Credit]) -> None:
    """Reclaim judged on the state after the plan (`floor`, `cap`, `keeps_floor`).

    Per leaf queue q: lost[q] = GPUs of its preempted jobs, of which inside[q] went to its
    own higher-priority starts and cross[q] = lost[q] - inside[q] to other queues, given in
    the fair-share tier or the guarantee tier: given[q,t]. A queue that gives in tier t
    stays above that tier's floor after losing all its victims but the largest:
    cross[q] - largest[q] < held_before[q] - floor[q,t]. A queue that receives in tier t
    ends at or below that tier's cap, and receives no more than it starts. Each tier's
    GPUs given are matched by GPUs received in it: sum_q given[q,t] <= sum_q received[q,t].
    Departments: the same rules on each department's net flow (docs/policy.md).
    """
    receivers = {r for r, gs in sc.givers.items() if gs}
    giving = set().union(*sc.givers.values()) if sc.givers else set()
    given_by_tier: dict[str, dict] = {t: {} for t in TIERS}
    received_by_tier: dict[str, dict] = {t: {} for t in TIERS}
    net: dict[str, tuple[dict, float]] = {}  # leaf -> received - cross
    largest: dict[str, dict] = {}  # leaf that may give -> size -> 1 if its largest victim has that size
    for q in st.tree.leaves:
        rcv = _receiver(m, st, acc, q, credit[q]) if q in receivers else {}
        for tier, (amount, _) in rcv.items():
            received_by_tier[tier][amount] = 1
        net[q] = _leaf(m, st, acc, q, rcv, q in giving, given_by_tier, largest)
    if largest:
        _matched(m, st, given_by_tier, received_by_tier, largest)
        if st.tree.departments:
            _departments(m, st, acc, net, largest)


def _leaf(m: PlanProgram, st: Standing, acc: Accounts, q: str, rcv: dict, gives: bool,
          given_by_tier: dict[str, dict], largest: dict[str, dict]) -> tuple[dict, float]:
    """Leaf queue q's victims: those lost to its own queue (`inside_victims`), and the
    floor rule on those given to other queues, in the tiers it may give in (none unless
    `gives`: some receiver may take from q). Returns q's net flow, received - given."""
    victims = [j for j in acc.decided[q] if j.name in m.decisions.victims]
    received = {amount: 1 for amount, _ in rcv.values()}
    if not victims:
        return received, 0.0
    cross, const = _lost(m, victims)
    inside_victims(m, acc, q, victims, received, cross, alone=not gives and not rcv)
    tiers = [t for t in TIERS if gives and may_give(st.shares, q, st.held[q], t)]
    if not tiers:
        # cross[q] <= 0: no other queue may take from q now
        m.add(affine(cross, const) <= 0, "no_reclaim")
        return received, 0.0
    largest[q] = m.flows.largest[q] = _largest(m, victims)
    for tier, amount in _giver(m, st, q, cross, const, largest[q], tiers, rcv).items():
        given_by_tier[tier][amount] = 1
    return {**received, **{v: -a for v, a in cross.items()}}, -const


def _matched(m: PlanProgram, st: Standing, given: dict[str, dict], received: dict[str, dict],
             largest: dict[str, dict]) -> None:
    """GPUs taken from other queues go to queues that may receive them, and each victim is
    needed: all GPUs given, less the largest victim, are fewer than all received; those
    given below a fair-share floor (the guarantee tier), less the largest, are no more than
    received in the guarantee tier."""
    givers = list(largest)
    picks = _largest_given(m, givers, largest)
    every = {v: 1 for tier in TIERS for v in given[tier]}
    any_given = m.binary("any_given", 0)
    # GPUs given <= big * any_given
    m.add(affine({**every, any_given: -(sum(st.held[q] for q in givers) + 1)}) <= 0, "matched")
    # GPUs given - the largest victim + strict * any_given <= GPUs received
    m.add(affine({**every, **{z: -size for z, size in picks.items()}, any_given: STRICT,
                  **{v: -1 for tier in TIERS for v in received[tier]}}) <= 0, "matched")
    if given[GUARANTEE]:
        # GPUs given in the guarantee tier - the largest victim <= GPUs received in it
        m.add(affine({**given[GUARANTEE], **{z: -size for z, size in picks.items()},
                      **{v: -1 for v in received[GUARANTEE]}}) <= 0, "matched")


def _largest_given(m: PlanProgram, givers: list[str], largest: dict[str, dict]) -> dict:
    """Binaries picking the one largest victim among `givers`: {binary: its size}."""
    picks = {}
    for q in givers:
        for size, z in largest[q].items():
            pick = m.binary("largest_given", 0)
            picks[pick] = size
            # pick <= largest[q,s]
            m.add(affine({pick: 1, z: -1}) <= 0, "largest_given")
    if picks:
        m.add(affine({z: 1 for z in picks}) <= 1, "largest_given")
    return picks


def _lost(m: PlanProgram, victims: list[Job]) -> tuple[dict, float]:
    """GPUs of `victims` preempted, as (terms, constant)."""
    lost: dict = defaultdict(float)
    const = 0.0
    for v in victims:
        t, c = m.preempted(v)
        for var, a in t.items():
            lost[var] += a * v.total_gpus
        const += c * v.total_gpus
    return dict(lost), const


def _largest(m: PlanProgram, victims: list[Job]) -> dict[float, object]:
    """One binary per victim size: 1 for the size of the largest victim preempted."""
    by_size: dict[float, list[Job]] = defaultdict(list)
    for v in victims:
        by_size[v.total_gpus].append(v)
    out = {}
    for size in sorted(by_size):
        z = out[size] = m.binary("largest", 0)
        terms: dict = {z: 1}
        const = 0.0
        for v in by_size[size]:
            t, c = m.preempted(v, "cross")
            for var, a in t.items():
                terms[var] = terms.get(var, 0) - a
            const -= c
        # largest[q,s] <= number of victims of size s preempted for other queues
        m.add(affine(terms, const) <= 0, "largest")
    m.add(affine({z: 1 for z in out.values()}) <= 1, "largest")
    return out


def _receiver(m: PlanProgram, st: Standing, acc: Accounts, q: str, credit: Credit) -> dict[str, tuple]:
    """Per tier q may receive in: (GPUs received, binary). GPUs taken from other queues
    serve only q's claims, its starts that count toward its share; so in the fair-share
    tier q's claims end within its fair share, and in the guarantee tier within its
    deserved quota. (q may still borrow beside them, like any queue, on GPUs no claim could
    use: claims before borrowing.)"""
    if not credit.claimed:
        return {}
    big = credit.const + most(credit.terms)
    out = {}
    for tier in TIERS:
        if not may_receive(st.shares, q, st.held[q], 0, tier):
            continue
        amount, on = m.var("received", 0, most(credit.claimed), initial=0), m.binary("receives", 0)
        # received[q,t] <= GPUs of q's claims * receives[q,t]
        m.add(affine({amount: 1, on: -most(credit.claimed)}) <= 0, "received")
        if tier == GUARANTEE:
            # credit[q] <= deserved[q] + big * (1 - receives[q,t])
            m.add(affine({**credit.terms, on: big}, credit.const) <= cap(st.shares, q, tier) + big,
                  "receive_cap")
        out[tier] = (amount, on)
        m.flows.receives.setdefault(q, {})[tier] = on
    if out:
        # received[q] <= GPUs of q's claims
        m.add(affine({**{a: 1 for a, _ in out.values()}, **{v: -g for v, g in credit.claimed.items()}}) <= 0,
              "received")
    return out


def _giver(m: PlanProgram, st: Standing, q: str, cross: dict, const: float, largest: dict, tiers: list[str],
           rcv: dict) -> dict[str, object]:
    """The floor rule of a queue that may give: per tier, the GPUs it gives in that tier."""
    big = most(cross) + abs(const) + 1
    parts = {}
    total: dict = {}
    for tier in tiers:
        amount, on = m.var("given", 0, st.held[q], initial=0), m.binary("gives", 0)
        parts[tier] = m.flows.gives.setdefault(q, {})[tier] = amount
        total[amount] = -1
        # given[q,t] <= big * gives[q,t]
        m.add(affine({amount: 1, on: -big}) <= 0, "gives")
        for _, receives in rcv.values():
            # a queue does not give and receive in one plan
            m.add(affine({on: 1, receives: 1}) <= 1, "gives_or_receives")
        floor_q = floor(st.shares, q, tier)
        slack = big + abs(st.held[q] - floor_q) + STRICT
        terms = dict(cross)
        for size, z in largest.items():
            terms[z] = terms.get(z, 0) - size
        terms[on] = slack
        # cross[q] - largest[q] <= held[q] - floor[q,t] - strict + slack * (1 - gives[q,t])
        m.add(affine(terms, const) <= st.held[q] - floor_q - STRICT + slack, "floor")
    # cross[q] = sum over tiers of given[q,t]
    m.add(affine({**cross, **total}, const) == 0, "given")
    return parts


def _departments(m: PlanProgram, st: Standing, acc: Accounts, net: dict[str, tuple[dict, float]],
                 largest: dict[str, dict]) -> None:
    """A department whose queues together receive more than they give across its boundary
    ends within its fair share (its deserved quota when one of its queues receives in the
    guarantee tier); one that gives more than it receives stays above its lower floor
    after losing all but its largest victim."""
    for d in st.tree.departments:
        leaves = st.tree.leaves_under(d)
        flow: dict = defaultdict(float)
        const = 0.0
        for q in leaves:
            t, c = net.get(q, ({}, 0.0))
            for v, a in t.items():
                flow[v] += a
            const += c
        if not flow:
            continue
        terms, held_const = acc.held(leaves)
        big = most(flow) + abs(const) + held_const + most(terms) + 1
        into, out_of = m.binary("dept_receives", 0), m.binary("dept_gives", 0)
        # net[d] <= big * receives[d];  -net[d] <= big * gives[d];  not both
        m.add(affine({**flow, into: -big}, const) <= 0, "dept_net")
        m.add(affine({**{v: -a for v, a in flow.items()}, out_of: -big}, -const) <= 0, "dept_net")
        m.add(affine({into: 1, out_of: 1}) <= 1, "dept_net")
        # allocated_after[d] <= fair[d] + big * (1 - receives[d])
        m.add(affine({**terms, into: big}, held_const) <= cap(st.shares, d, FAIR) + big, "dept_cap")
        for q in leaves:
            on = m.flows.receives.get(q, {}).get(GUARANTEE)
            if on is not None:
                # allocated_after[d] <= deserved[d] + big * (2 - receives[d] - receives_guarantee[q])
                m.add(affine({**terms, into: big, on: big}, held_const)
                      <= cap(st.shares, d, GUARANTEE) + 2 * big, "dept_cap")
        low = min(floor(st.shares, d, t) for t in TIERS)
        given = {v: -a for v, a in flow.items()}
        picks = {}
        for size in sorted({size for q in leaves for size in largest.get(q, {})}):
            z = picks[size] = m.binary("largest", 0)
            # largest[d,s] <= sum over its queues of largest[q,s]
            m.add(affine({z: 1, **{largest[q][size]: -1 for q in leaves if size in largest.get(q, {})}}) <= 0,
                  "largest")
            given[z] = -size
        if picks:
            m.add(affine({z: 1 for z in picks.values()}) <= 1, "largest")
        slack = big + abs(st.held[d] - low) + STRICT
        given[out_of] = slack
        # given[d] - largest[d] <= held[d] - floor[d] - strict + slack * (1 - gives[d])
        m.add(affine(given, -const) <= st.held[d] - low - STRICT + slack, "dept_floor")


class Reclaim(Rule):
    """Reclaim across queues, judged on the state after the plan: who may take from whom
    (for the scope), the rows, and the reasons (its victims' order is the victims rule's)."""

    name = "reclaim"
    codes = {
        "ReclaimedFairShare": "preempted for another queue: its queue is above its fair share (fair-share tier)",
        "ReclaimedGuarantee": "preempted for another queue below its deserved quota (guarantee tier)",
    }

    def givers(self, tree: QueueTree, shares: Shares, held: Mapping[str, float],
               waiting: list[Job]) -> dict[str, set[str]]:
        """For each queue with waiting work, the queues it may ever reclaim from (judged on the
        state before the plan with its smallest waiting job: a necessary condition)."""
        smallest: dict[str, float] = {}
        for job in waiting:
            smallest[job.queue] = min(smallest.get(job.queue, job.total_gpus), job.total_gpus)
        return {r: {g for g in tree.leaves if reclaim_tiers(tree, shares, held, r, g, gpus)}
                for r, gpus in smallest.items()}

    def may_take(self, victim: Job, claimant: Job | None, givers: set[str]) -> bool | None:
        """A queue may take GPUs of the queues it may reclaim from (`givers`)."""
        return True if victim.queue in givers else None

    def rows(self, ctx: PlanContext) -> None:
        reclaim(ctx.m, ctx.standing, ctx.accounts, ctx.scope, ctx.credits)

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """The free GPUs cannot hold the job and reclaim made no room for it: GPUs of pods
        shutting down come back later, no queue it may reclaim from is above its floor where it
        would fit, or the plan ran out of time before deciding reclaim."""
        room = judged.no_room(job)
        if room is None:
            return None
        if judged.cut_off:  # reclaim may be possible: the solver stopped before deciding it
            return Reason("PlanCutShort", f"{room.text}; the plan's time limit ran out before reclaiming GPUs for it "
                                          "was decided")
        return room.with_clause(_shutting_down(judged) or _no_reclaim(job, judged))


    def why_preempt(self, job: Job, judged: Judged, started: Mapping[str, list[Job]]) -> Reason | None:
        """The job's queue gives GPUs to other queues in this plan (`started`: the jobs the plan
        starts, per queue): who takes them, within which share, and what the giver keeps."""
        j, q = judged, job.queue
        tier = j.giving.get(q)
        if not tier:
            return None
        takers = sorted(r for r in started if r in j.receiving and r != q)
        parts = [_taker(j, j.tree.judged(r, q)[0][-1], tier) for r in takers]
        return self.reason("ReclaimedGuarantee" if tier == GUARANTEE else "ReclaimedFairShare",
                      f"reclaimed for {', '.join(takers) or 'other queues'} ({tier} tier): "
                      f"{'; '.join(parts) + '; ' if parts else ''}{q} held {j.before[q]:g} GPUs, above its "
                      f"{_tier_share(j.shares, q, tier)}, and keeps {j.after[q]:g}")
