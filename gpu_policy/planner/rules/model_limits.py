"""Per-model limits: a queue with `models: {M: {limit: N}}` never holds more than N GPUs on
nodes of GPU model M, and its departments' limits bind its jobs too (Kueue's per-flavor
quota, Run:ai's node-pool quota). A job that would exceed a limit on every model it could use
waits with the code `ModelLimit`; one that accepts several models starts on another.

The program counts each limited queue's GPUs per model: its running jobs that stay where they
are, and its started and moved replicas by where they are placed, which it can tell apart
because the rule marks the jobs of limited queues (`apart`: their replicas are placed as
shapes of their own). Like `limit`, a limit lowered below what a queue already holds on a
model preempts nothing: the row's bound is the larger of the two.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

from gpu_policy.model import EPS, Job
from gpu_policy.planner.core.codes import Reason, gpu_count
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.queues import QueueTree
from gpu_policy.planner.core.rule import PlanInputs, Rule
from gpu_policy.planner.core.scope import Scope


class ModelLimits(Rule):
    """Per-model limits of queues and departments: rows, and the reason a job waits."""

    name = "model_limits"
    codes = {"ModelLimit": "starting it would take its queue, or a department above it, above its limit of GPUs "
                           "of each GPU model it could use"}

    def __init__(self, inputs: PlanInputs):
        super().__init__(inputs)
        s = inputs.scenario
        self.tree = QueueTree.of(s)
        #: entity -> model -> the most GPUs of that model it may hold
        self.limits = {q.name: {m: quota.limit for m, quota in q.models.items() if quota.limit is not None}
                       for q in s.queues}
        self.limits = {e: mine for e, mine in self.limits.items() if mine}
        #: the leaf queues a limit binds: their jobs are told apart
        self.bound = frozenset(leaf for e in self.limits for leaf in self.tree.leaves_under(e))
        self.model_of = {n.name: n.gpu_model for n in s.nodes}

    def apart(self, job: Job) -> Hashable:
        return job.queue if job.queue in self.bound else None

    def rows(self, ctx: PlanContext) -> None:
        """GPUs an entity holds on nodes of model M after the plan <= max(its limit on M, what
        it holds there before)."""
        if not self.limits:
            return
        held = self._held_before(ctx)
        terms, const = self._held_after(ctx.m, ctx.scope, ctx)
        for e, mine in self.limits.items():
            leaves = self.tree.leaves_under(e)
            for model, limit in mine.items():
                t: dict = defaultdict(float)
                c = 0.0
                for q in leaves:
                    for var, a in terms[q, model].items():
                        t[var] += a
                    c += const[q, model]
                if t:
                    before = sum(held[q, model] for q in leaves)
                    # GPUs of e on model M after the plan <= max(limit[e, M], GPUs of e on M before)
                    ctx.m.add(affine(t, c) <= max(limit, before), "model_limit")

    def _held_before(self, ctx: PlanContext) -> dict[tuple[str, str | None], float]:
        """Per (leaf queue, model), the GPUs its running jobs hold now."""
        held: dict[tuple[str, str | None], float] = defaultdict(float)
        for job in ctx.scenario.jobs:
            if job.queue in self.bound:
                for node in job.running:
                    held[job.queue, self.model_of[node]] += job.gpus
        return held

    def _held_after(self, m: PlanProgram, sc: Scope, ctx: PlanContext) -> tuple[dict, dict]:
        """Per (leaf queue, model), what it holds after the plan as (terms, constant): its
        running jobs where they stay (kept, or not cut), and its replicas placed on detailed
        nodes and pools of that model."""
        terms: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
        const: dict[tuple, float] = defaultdict(float)
        d = m.decisions
        for job in ctx.scenario.jobs:
            if job.queue not in self.bound or not job.running:
                continue
            if job.name in d.keep:
                stays, once = {d.keep[job.name]: 1}, 0.0
            elif job.name in d.cut:
                stays, once = {w: -1 for w in d.cut[job.name]}, 1.0
            else:
                stays, once = {}, 1.0
            for node in job.running:
                key = (job.queue, self.model_of[node])
                for var, a in stays.items():
                    terms[key][var] += a * job.gpus
                const[key] += once * job.gpus
        pool_model = {key: self.model_of[nodes[0]] for key, nodes in sc.pools.items()}
        placed = [((n, shape), var, self.model_of[n]) for (n, shape), var in m.placement.whole.items()]
        placed += [((n, i, shape), var, self.model_of[n]) for (n, i, shape), var in m.placement.frac.items()]
        placed += [((key, shape), var, pool_model[key]) for (key, shape), var in m.placement.pool.items()]
        for (*_, shape), var, model in placed:
            if shape.apart is not None and (q := _queue_of(shape.apart, self.bound)) is not None:
                terms[q, model][var] += shape.gpus
        return terms, const

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """The free GPUs the job could use are all of models on which its queue, or a
        department above it, is at its limit."""
        if job.queue not in self.bound:
            return None
        room = judged.room_for(job)
        usable = [model for model in room.models(job) if _has_room(room, model, job)]
        blocked = [(model, self._blocker(job, model, judged)) for model in usable]
        if not usable or any(e is None for _, e in blocked):
            return None
        after = judged.shared((self.name,), lambda: self._held_after_plan(judged))
        parts = [f"{e if e == job.queue else f'{e} (department of {job.queue})'} may hold at most "
                 f"{gpu_count(self.limits[e][model])} of model {model} and holds {after[e, model]:g} after this plan"
                 for model, e in blocked]
        return self.reason("ModelLimit", f"needs {gpu_count(job.total_gpus)}; " + "; ".join(parts))

    def _blocker(self, job: Job, model: str | None, judged: Judged) -> str | None:
        """The first entity, from the job's queue up, whose limit on `model` the job would break."""
        after = judged.shared((self.name,), lambda: self._held_after_plan(judged))
        for e in self.tree.path(job.queue):
            limit = self.limits.get(e, {}).get(model)
            if limit is not None and after[e, model] + job.total_gpus > limit + EPS:
                return e
        return None

    def _held_after_plan(self, judged: Judged) -> dict[tuple[str, str | None], float]:
        """Per (entity, model), the GPUs it holds on nodes of that model after the plan."""
        queue_of = {job.name: job.queue for job in judged.s.jobs}
        leaf: dict[tuple[str, str | None], float] = defaultdict(float)
        for name, nl in judged.layout.nodes.items():
            model = nl.node.gpu_model
            for slot in nl.slots:
                if slot.whole is not None:
                    leaf[queue_of[slot.whole], model] += 1
                for held, share in slot.fractions:
                    leaf[queue_of[held], model] += share
        out: dict[tuple[str, str | None], float] = defaultdict(float)
        for (q, model), gpus in leaf.items():
            if q in self.tree.parent:
                for e in self.tree.path(q):
                    out[e, model] += gpus
        return out


def _queue_of(mark: tuple, bound: frozenset[str]) -> str | None:
    """The queue a shape's mark (`Shape.apart`, one entry per rule that tells apart) names."""
    return next((m for m in mark if m in bound), None)


def _has_room(room, model: str | None, job: Job) -> bool:
    """Whether the free room (`judged.room_for`) on nodes of `model` could hold one replica."""
    if job.is_fractional:
        return any(share >= job.gpus - EPS for share, *_ in room.shares[model])
    return any(free >= job.gpus for free, nodes in room.blocks[model].items() if nodes)

