"""Minimum runtime and preemption delay (KAI's min-runtime and preemption-delay): a job of a
queue with `min_runtime_s` is no victim, of reclaim, of preemption inside its queue or of a
move, before its `running_for_s` reaches it; a waiting job of a queue with
`preemption_delay_s` makes nobody a victim before its `waiting_for_s` reaches it, moves
included: it may still start on GPUs that are free without moving anyone. Unknown ages (None)
protect nothing and delay nothing.

The scope asks `may_take` and `may_move`; in the program a delayed job's replicas are told
apart (`apart`) and placed only within the GPUs free before the plan (`rows`), so GPUs that
victims or moves free go to others.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

from gpu_policy.model import EPS, Job
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.rule import PlanInputs, Rule

#: The mark of a delayed job's replicas (`Shape.apart`).
DELAYED = "delayed"


def protected_for(job: Job, min_runtime_s: float) -> float | None:
    """Seconds the running `job` stays protected by its queue's minimum runtime (None: it is not)."""
    if min_runtime_s <= 0 or job.running_for_s is None or job.running_for_s >= min_runtime_s:
        return None
    return min_runtime_s - job.running_for_s


def delayed_for(job: Job, preemption_delay_s: float) -> float | None:
    """Seconds the waiting `job` still makes nobody a victim (None: it may)."""
    if preemption_delay_s <= 0 or job.waiting_for_s is None or job.waiting_for_s >= preemption_delay_s:
        return None
    return preemption_delay_s - job.waiting_for_s


class Protection(Rule):
    """Minimum runtime and preemption delay: who may be taken or moved (for the scope), the
    rows that keep a delayed job on GPUs free now, and the reasons."""

    name = "protection"
    codes = {
        "MinRuntime": "the GPUs it could take are held by jobs inside their queue's minimum runtime",
        "PreemptionDelay": "its queue's preemption delay has not passed: it preempts or moves nobody yet",
    }

    def __init__(self, inputs: PlanInputs):
        super().__init__(inputs)
        queues = inputs.scenario.queues
        self.min_runtime = {q.name: q.min_runtime_s for q in queues if q.min_runtime_s > 0}
        self.delay = {q.name: q.preemption_delay_s for q in queues if q.preemption_delay_s > 0}

    def protected(self, job: Job) -> float | None:
        return protected_for(job, self.min_runtime.get(job.queue, 0.0))

    def delayed(self, job: Job) -> float | None:
        return delayed_for(job, self.delay.get(job.queue, 0.0))

    # -- before the program ---------------------------------------------------------------------

    def victim_key(self, job: Job) -> Hashable:
        return self.protected(job) is not None if self.min_runtime else None

    def may_take(self, victim: Job, claimant: Job | None, givers: set[str]) -> bool | None:
        if self.protected(victim) is not None or (claimant is not None and self.delayed(claimant) is not None):
            return False
        return None

    def may_move(self, job: Job | None, claimant: Job | None) -> bool | None:
        if (job is not None and self.protected(job) is not None) or \
                (claimant is not None and self.delayed(claimant) is not None):
            return False
        return None

    def apart(self, job: Job) -> Hashable:
        return DELAYED if self.delay and not job.running and self.delayed(job) is not None else None

    # -- the program ----------------------------------------------------------------------------

    def rows(self, ctx: PlanContext) -> None:
        """A delayed job's replicas fit in the GPUs free before the plan: per detailed node,
        whole GPUs placed <= its free GPUs now, and fractions placed on a GPU <= the room it has
        now; per pool, whole GPUs placed <= the pool's free GPUs now."""
        if not self.delay:
            return
        m, layout = ctx.m, ctx.layout
        whole: dict[str, dict] = defaultdict(dict)
        for (n, shape), var in m.placement.whole.items():
            if _delayed(shape.apart):
                whole[n][var] = shape.whole_gpus
        for n, terms in whole.items():
            # whole GPUs of delayed jobs placed on n <= GPUs free on n before the plan
            m.add(affine(terms) <= len(layout.nodes[n].free_indices()), "delayed_free")
        shared: dict[tuple[str, int], dict] = defaultdict(dict)
        for (n, i, shape), var in m.placement.frac.items():
            if _delayed(shape.apart):
                shared[n, i][var] = shape.gpus
        for (n, i), terms in shared.items():
            nl = layout.nodes[n]
            room = 0.0 if nl.slots[i].whole is not None or not nl.healthy(i) else 1.0 - nl.slots[i].used
            # fractions of delayed jobs placed on GPU i of n <= the room it has before the plan
            m.add(affine(terms) <= max(0.0, room), "delayed_free")
        pooled: dict = defaultdict(dict)
        for (key, shape), var in m.placement.pool.items():
            if _delayed(shape.apart):
                pooled[key][var] = shape.whole_gpus
        for key, terms in pooled.items():
            free = sum(len(layout.nodes[n].free_indices()) for n in ctx.scope.pools.get(key, ()))
            # whole GPUs of delayed jobs placed on a pool <= its GPUs free before the plan
            m.add(affine(terms) <= free, "delayed_free")

    # -- the reasons ----------------------------------------------------------------------------

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """The free GPUs cannot hold the job, and either its queue's preemption delay keeps it
        from making room, or the jobs it could take are inside their minimum runtime."""
        if not (self.delay or self.min_runtime):
            return None
        room = judged.no_room(job)
        if room is None:
            return None
        left = self.delayed(job)
        if left is not None:
            return self.reason("PreemptionDelay", f"{room.text}; {job.queue} preempts or moves nobody for a job "
                                                  f"until it has waited {self.delay[job.queue]:g} s "
                                                  f"(preemption_delay_s), {left:.0f} s more")
        guarded = sorted(((left, other.name) for other in judged.s.jobs
                          if other.running and (left := self.protected(other)) is not None
                          and _could_take(job, other, judged)))
        if not guarded:
            return None
        names = ", ".join(name for _, name in guarded[:3]) + (f" and {len(guarded) - 3} more" if len(guarded) > 3
                                                               else "")
        return self.reason("MinRuntime", f"{room.text}; the jobs it could take ({names}) are inside their queue's "
                                         f"minimum runtime, the first for {guarded[0][0]:.0f} s more")


def _delayed(mark: Hashable) -> bool:
    """Whether a shape's mark (one entry per rule that tells apart) is a delayed job's."""
    return mark is not None and DELAYED in mark


def _could_take(job: Job, other: Job, judged: Judged) -> bool:
    """Whether `job` could ever take `other`'s GPUs, its protection aside: a preemptible job of
    its own queue with a lower priority, or of another queue above its fair share after the plan."""
    if not other.is_preemptible:
        return False
    if other.queue == job.queue:
        return other.priority < job.priority
    return judged.after[other.queue] > judged.shares.fair[other.queue] + EPS
