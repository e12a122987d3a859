"""Priority inside a queue: only a strictly higher priority of the same queue preempts
(`may_preempt_inside`), only for GPUs its starts need (`most_idle_for_inside_victim`,
`gathered_by_moves`), and never so that the victim could swap back (`may_swap_back`).
The program's rows and stages for this rule are here too: the inside victims' variables
(`inside_victims`, which `rules.reclaim` keeps out of what a queue gives to others), no swap
back (`no_swap_inside`), preempt only for GPUs the starts need (`inside_only_when_needed`),
and the `priority_p<P>` stages (`priority_levels`)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

from gpu_policy.model import EPS, Job, Scenario
from gpu_policy.model.placement import constraints_of
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.context import Accounts, PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.queues import STRICT
from gpu_policy.planner.core.rule import Rule, Stage
from gpu_policy.planner.core.scope import Standing
from gpu_policy.planner.core.shapes import Eligible

def _preempted_inside(rule: Rule, job: Job, started: Mapping[str, list[Job]]) -> Reason | None:
    mine = [p for p in started.get(job.queue, ()) if may_preempt_inside(job, p)]
    if not mine:
        return None
    names = ", ".join(f"{p.name} (priority {p.priority})" for p in mine)
    return rule.reason("PreemptedInsideQueue", f"preempted inside {job.queue} (priority {job.priority}) for "
                                          f"higher-priority {names}")


def may_preempt_inside(victim: Job, job: Job) -> bool:
    """Preemption inside a queue: only a strictly higher priority preempts."""
    return victim.is_preemptible and victim.queue == job.queue and victim.priority < job.priority


def most_idle_for_inside_victim(victim: Job) -> float:
    """Preempt inside a queue only for GPUs the queue's starts need: the GPUs the plan
    leaves idle (fractions counted by size: moves could gather them) are fewer than the
    victim's, so it could not run on them. Otherwise the preemption would only turn its
    queue's higher-priority start from borrowing into a claim, and the next plan would
    gather the idle GPUs and restart the victim. The most GPUs a plan that preempts
    `victim` for its own queue may leave idle."""
    return victim.total_gpus - STRICT


def gathered_by_moves(victim: Job) -> bool:
    """Whether idle GPUs in the cluster, counted by amount, say the victim could run once
    moves gather them: for replicas of at most one GPU (fractions, single GPUs) moves of
    fractions can gather a GPU anywhere; a replica of several GPUs needs them on one node,
    which idle GPUs spread over nodes do not give."""
    return victim.gpus <= 1


def may_swap_back(victim: Job, starter: Job) -> bool:
    """Could `victim`, preempted by a plan that starts `starter` of its queue, take
    `starter`'s place in the next plan? Only a strictly higher priority preempts inside a
    queue, and only where the starter's GPUs could hold the victim's replicas: a whole-GPU
    starter frees whole GPUs, each of which holds one fractional replica; a fractional
    starter frees fractions, which may share one GPU (so k of them make room for a
    fraction up to k times their size), and never a whole GPU for sure."""
    if not may_preempt_inside(starter, victim):
        return False
    if victim.is_fractional:
        if not starter.is_fractional:
            return victim.replicas <= starter.replicas * int(starter.gpus)
        per_place = math.ceil(victim.gpus / starter.gpus - EPS)  # starter replicas one victim replica needs
        return victim.replicas <= starter.replicas // per_place
    if starter.is_fractional:
        return False
    return victim.gpus <= starter.gpus and victim.replicas <= starter.replicas * (starter.gpus // victim.gpus)


def priority_levels(m: PlanProgram, st: Standing, acc: Accounts) -> list[tuple[str, dict]]:
    """Stages `priority_p<P>`, highest P first: inside a queue, work of priority >= P
    before lower-priority work (a waiting job may preempt lower-priority jobs of its own
    queue). Only queues where some job has a lower priority than a waiting one count."""
    levels: dict[int, dict] = defaultdict(dict)
    for q in st.tree.leaves:
        mine = acc.jobs[q]
        waiting = {k.priority for k in m.decisions.starts if k.queue == q}
        decided = None  # (priority, terms, GPUs) of q's jobs whose running the program decides
        for level in waiting:
            if not any(j.priority < level for j in mine):
                continue
            if decided is None:
                decided = [(j.priority, m.runs(j)[0], j.total_gpus) for j in acc.decided[q]]
            for priority, terms, gpus in decided:
                if priority >= level:
                    for v, a in terms.items():
                        levels[level][v] = levels[level].get(v, 0) - a * gpus
            for v, g in m.started(lambda k: k.queue == q and k.priority >= level).items():
                levels[level][v] = levels[level].get(v, 0) - g
    return [(f"priority_p{level}", levels[level]) for level in sorted(levels, reverse=True)]


def inside_victims(m: PlanProgram, acc: Accounts, q: str, victims: list[Job], received: dict,
                   cross: dict, alone: bool) -> None:
    """Victims q may lose to its own higher-priority starts (inside[v]); their GPUs leave
    cross[q] (the GPUs the reclaim rule counts as given to other queues). They go for those
    starts whether the queue is within its fair share or above it (the contract's "Preempt
    (inside a queue)", KAI's preempt action): the GPUs they free count for the starts, not on
    top of them. In a queue no other queue may take from or give to in this plan (`alone`),
    each victim goes for a start of a higher priority than its own, and all their GPUs but
    the largest victim's are fewer than the starts take: a larger victim may go for a smaller
    job, and the queue ends lower than before. Otherwise the victims' GPUs (and those the
    queue receives) are no more than its starts take, above the lowest victim's priority too,
    so a swap never rides on GPUs taken from, or given to, another queue. The preemption
    stages take the cheapest victims that make room.

    inside[v] <= preempted[v];
    alone: inside[v] <= starts of q's kinds above v's priority, and
        inside GPUs + received GPUs - GPUs q starts <= the largest victim - strict;
    else: inside GPUs <= GPUs started by q's kinds above the lowest victim's priority, and
        inside GPUs + received GPUs <= GPUs q starts
    """
    waiting = [jobs[0] for k, jobs in m.decisions.kinds.items() if k.queue == q and k in m.decisions.starts]
    mine = [v for v in victims if any(may_preempt_inside(v, p) for p in waiting)]
    if not mine:
        return
    inside = {}
    for v in mine:
        var = m.flows.inside[v.name] = m.binary("inside", 0)
        inside[var] = v.total_gpus
        terms, const = m.preempted(v)
        # inside[v] <= preempted[v]
        m.add(affine({**terms, var: -1}, const) >= 0, "inside")
        cross[var] = cross.get(var, 0) - v.total_gpus
    if alone:
        for v in mine:
            above = {start: -1 for kind, start in m.decisions.starts.items()
                     if kind.queue == q and kind.priority > v.priority}
            # inside[v] <= starts of q's kinds of a higher priority than v's
            m.add(affine({m.flows.inside[v.name]: 1, **above}) <= 0, "inside")
        slack = max(v.total_gpus for v in mine) - STRICT
    else:
        lowest = min(v.priority for v in mine)
        above = m.started(lambda k: k.queue == q and k.priority > lowest)
        # GPUs of inside victims <= GPUs started by q's jobs above the lowest of them
        m.add(affine({**inside, **{v: -g for v, g in above.items()}}) <= 0, "inside")
        slack = 0.0
    # inside GPUs + received GPUs - GPUs q starts <= slack
    m.add(affine({**inside, **received, **{v: -g for v, g in acc.new[q].items()}}) <= slack, "inside")


def no_swap_inside(m: PlanProgram, st: Standing, acc: Accounts) -> None:
    """Inside a queue only a strictly higher priority preempts: a plan that preempts a job
    of a queue (for whatever reason) starts none of the queue's lower-priority jobs whose
    place it could take (`may_swap_back`). Otherwise a job reclaimed for another queue
    could be swapped for its own queue's lower-priority work, and the next plan, in which
    the preempted job waits with the higher priority, would swap them back.

    starts[k] <= n[k] * (1 - preempted[v]) for each such victim v and kind k.
    """
    for q in st.tree.leaves:
        victims = [j for j in acc.decided[q] if j.name in m.decisions.victims]
        kinds = [(k, var, m.decisions.kinds[k][0]) for k, var in m.decisions.starts.items() if k.queue == q]
        for v in victims:
            for kind, var, starter in kinds:
                if may_swap_back(v, starter):
                    terms, const = m.preempted(v)
                    m.add(affine({var: 1, **{x: var.upBound * a for x, a in terms.items()}},
                                 var.upBound * const) <= var.upBound, "no_swap")


def inside_only_when_needed(m: PlanProgram, s: Scenario, st: Standing, acc: Accounts) -> None:
    """A job preempted for its own queue's higher-priority work leaves fewer idle GPUs than
    it holds (`most_idle_for_inside_victim`): idle GPUs after the plan, counted on the
    whole cluster with fractions by size (moves could gather them), and on composable nodes
    with the GPUs they attach, detach or, attaching first, could still take (as
    `rules.move_first.no_room_left_for_victims` counts them). Only for victims whose replicas hold
    at most one GPU each (`gathered_by_moves`; a gang counts all its GPUs) and that
    any node's GPU model and placement constraints suit (docs/policy.md, "Known approximations").

    idle_after = healthy + GPUs gained - GPUs held after (one row, which each victim's uses);
    idle_after <= most idle[v] + (highest idle - most idle[v]) * (1 - inside[v])

    The second rows are held back until a solution breaks one (`Program.lazy`): they seldom
    bind (where the fair-share stages hand every free GPU out, no plan leaves one idle), and
    where they are, HiGHS's cuts close the preemption stages' gaps far less often: the
    5,000-node bench instance with gangs took 10 s for `preemption_p10` with them, 0.5 s
    without, for the same optimum (docs/benchmarks.md).
    """
    if not m.flows.inside:
        return
    idle, idle_const = _idle_after(m, s, st, acc)
    high = idle_const + sum(a * (x.upBound if a > 0 else (x.lowBound or 0)) for x, a in idle.items())
    low = idle_const + sum(a * ((x.lowBound or 0) if a > 0 else x.upBound) for x, a in idle.items())
    jobs = {j.name: j for j in acc.candidates}  # the inside victims are among them
    eligible = Eligible(s.nodes)
    victims = [(inside, jobs[name]) for name, inside in m.flows.inside.items()
               if _idle_counts_for(jobs[name], eligible, s)]
    if not victims:
        return
    idle_after = m.var("idle", low, high)
    # idle_after = healthy + GPUs gained - GPUs held after
    m.add(affine({**{x: -a for x, a in idle.items()}, idle_after: 1}) == idle_const, "idle")
    for inside, v in victims:
        bound = most_idle_for_inside_victim(v)
        if high <= bound:
            continue
        # idle_after <= most idle[v] + (high - most idle[v]) * (1 - inside[v])
        m.add(affine({idle_after: 1, inside: high - bound}) <= high, "inside_needed", lazy=True)


def _idle_after(m: PlanProgram, s: Scenario, st: Standing, acc: Accounts) -> tuple[dict, float]:
    """Idle GPUs after the plan as (terms, constant): healthy GPUs, plus those composable
    nodes gain (`Growth.for_victims`), less the GPUs every queue holds after the plan."""
    terms, const = acc.held(st.tree.leaves)
    idle: dict = defaultdict(float, {x: -a for x, a in terms.items()})
    idle_const = float(s.gpus_schedulable) - const
    for n in (m.growth.room.keys() | m.growth.attach.keys() | m.growth.detach.keys() if m.growth else ()):
        extra, extra_const = m.growth.for_victims(n)
        for x, a in extra.items():
            idle[x] += a
        idle_const += extra_const
    return idle, idle_const


def _idle_counts_for(victim: Job, eligible: Eligible, s: Scenario) -> bool:
    """Whether idle GPUs anywhere in the cluster could hold the victim: replicas of at most
    one GPU (`gathered_by_moves`), and every node's GPU model and placement
    constraints suit it."""
    return (gathered_by_moves(victim)
            and not (victim.gpu_model and any(n.gpu_model not in victim.gpu_model for n in s.nodes))
            and _anywhere(eligible.names(constraints_of(victim)), s))


def _anywhere(names: frozenset[str] | None, s: Scenario) -> bool:
    """Whether the eligible node `names` (None: all) are every node of the scenario."""
    return names is None or len(names) == len(s.nodes)


class Inside(Rule):
    """Priority inside a queue: who may take a job of its own queue (for the scope), no swap
    back, preempt only for GPUs the starts need (its victims' variables come with the reclaim
    rule's rows), the priority stages, and the reasons."""

    name = "inside"
    codes = {
        "WouldSwapInsideQueue": "its queue loses a job in this plan that could take this one's place",
        "PreemptedInsideQueue": "preempted for a higher-priority job of its own queue",
    }
    #: Where its stages rank: after the preemptions for other queues, before those inside a queue.
    PRIORITY = 40

    def may_take(self, victim: Job, claimant: Job | None, givers: set[str]) -> bool | None:
        """Only a strictly higher priority of the same queue takes a job's GPUs inside it."""
        return True if claimant is not None and may_preempt_inside(victim, claimant) else None

    def rows(self, ctx: PlanContext) -> None:
        no_swap_inside(ctx.m, ctx.standing, ctx.accounts)
        inside_only_when_needed(ctx.m, ctx.scenario, ctx.standing, ctx.accounts)

    def stages(self, ctx: PlanContext) -> list[Stage]:
        return [Stage(self.PRIORITY, lambda: [(name, affine(terms))
                                              for name, terms in priority_levels(ctx.m, ctx.standing, ctx.accounts)])]

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """The free GPUs would hold the job, but its queue loses a job in this plan that could
        take its place (`may_swap_back`): starting it would only swap them."""
        if judged.no_room(job) is not None:
            return None
        q = job.queue
        v = next((v for v in judged.swapped.get(q, ()) if may_swap_back(v, job)), None)
        if v is None:
            return None
        return self.reason("WouldSwapInsideQueue",
                      f"{q} loses {v.name} (priority {v.priority}) in this plan; inside a queue only a higher "
                      f"priority takes a job's place, and {v.name} could take this one's")


    def why_preempt(self, job: Job, judged: Judged, started: Mapping[str, list[Job]]) -> Reason | None:
        """The job makes way for higher-priority jobs of its own queue that the plan starts
        (`started`: per queue). The reason is the same for every victim of one queue, priority
        and preemptibility (all `may_preempt_inside` reads of a victim), so it is worked out once
        for them: a queue's victims would each read all its starts."""
        return judged.shared(("inside", job.queue, job.priority, job.is_preemptible),
                             lambda: _preempted_inside(self, job, started))
