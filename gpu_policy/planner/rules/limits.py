"""Limits and non-preemptible work: an entity never holds more than its limit (unless it
already did: a limit lowered below use preempts nothing), and non-preemptible work starts
only within deserved. The program's rows: `limits_and_nonpreemptible`."""

from __future__ import annotations

from gpu_policy.model import EPS, Job
from gpu_policy.planner.core.codes import Reason, gpu_count
from gpu_policy.planner.core.context import Accounts, PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.queues import QueueTree, Shares
from gpu_policy.planner.core.rule import Rule
from gpu_policy.planner.core.scope import Standing


def _entity(name: str, queue: str) -> str:
    return name if name == queue else f"{name} (department of {queue})"


def limit_bound(shares: Shares, entity: str, held_before: float) -> float | None:
    """Most GPUs the entity may hold after the plan: its limit, or what it already holds
    when that is more (a limit lowered below use preempts nothing). None: no limit."""
    limit = shares.limit[entity]
    return None if limit is None else max(limit, held_before)


def limit_blocker(tree: QueueTree, shares: Shares, held: dict[str, float], queue: str, gpus: float) -> str | None:
    """The first entity, from the queue up, whose limit `gpus` more would break."""
    for e in tree.path(queue):
        bound = shares.limit[e]
        if bound is not None and held[e] + gpus > bound + EPS:
            return e
    return None


def nonpreemptible_bound(shares: Shares, entity: str, held_nonpreemptible: float) -> float:
    """Most non-preemptible GPUs the entity may hold after starting non-preemptible work:
    its deserved quota (never less than what already runs: nothing is preempted for it)."""
    return max(shares.deserved[entity], held_nonpreemptible)


def nonpreemptible_blocker(tree: QueueTree, shares: Shares, held_nonpreemptible: dict[str, float], queue: str,
                           gpus: float) -> str | None:
    """Non-preemptible jobs start only while the queue and every department above it stay
    within deserved in non-preemptible GPUs: the first entity that would not, or None."""
    for e in tree.path(queue):
        if held_nonpreemptible[e] + gpus > nonpreemptible_bound(shares, e, held_nonpreemptible[e]) + EPS:
            return e
    return None


def limits_and_nonpreemptible(m: PlanProgram, st: Standing, acc: Accounts) -> None:
    for e in st.tree.parent:
        leaves = st.tree.leaves_under(e)
        terms, const = acc.held(leaves)
        bound = limit_bound(st.shares, e, st.held[e])
        if bound is not None and terms:
            # allocated_after[e] <= max(limit[e], allocated_before[e])
            m.add(affine(terms, const) <= bound, "limit")
        mine = set(leaves)
        pinned = m.started(lambda k: k.queue in mine and not k.preemptible)
        if pinned:
            before = st.held_nonpreemptible[e]
            # non-preemptible GPUs of e after <= max(deserved[e], non-preemptible GPUs of e before)
            m.add(affine(pinned, before) <= nonpreemptible_bound(st.shares, e, before), "nonpreemptible")


class Limits(Rule):
    """Limits and non-preemptible work within deserved: rows, and the reasons they give."""

    name = "limits"
    codes = {
        "QueueAboveLimit": "starting it would take its queue, or a department above it, above its limit",
        "NonPreemptibleAboveDeserved": "a non-preemptible job starts only within its queue's deserved quota",
    }

    def rows(self, ctx: PlanContext) -> None:
        limits_and_nonpreemptible(ctx.m, ctx.standing, ctx.accounts)

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """Starting the job would take its queue, or a department above it, above its limit, or
        take non-preemptible work above deserved (judged on the queues after the plan)."""
        j, q = judged, job.queue
        blocker = limit_blocker(j.tree, j.shares, j.after, q, job.total_gpus)
        if blocker:
            return self.reason("QueueAboveLimit", f"{_entity(blocker, q)} is at its limit: holds "
                                             f"{j.after[blocker]:g} of {gpu_count(j.shares.limit[blocker])}")
        if job.is_preemptible:
            return None
        blocker = nonpreemptible_blocker(j.tree, j.shares, j.nonpreemptible_after, q, job.total_gpus)
        if blocker:
            return self.reason("NonPreemptibleAboveDeserved",
                          f"non-preemptible jobs start only within deserved: {_entity(blocker, q)}'s would "
                          f"hold {j.nonpreemptible_after[blocker] + job.total_gpus:g} of its "
                          f"{j.shares.deserved[blocker]:g} deserved GPUs")
        return None
