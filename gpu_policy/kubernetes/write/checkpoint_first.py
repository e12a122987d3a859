"""Preemption that loses no work: checkpoint first, then evict (spec "Preemption that loses no
work"; docs/kubernetes.md, "Checkpoint first, then evict").

`judge` decides what this round does with each victim of a plan (a preempt or a move):
- one that saves on request is asked once: its pods get `gpu-policy.io/checkpoint-requested:
  <now>`. It is evicted as soon as every pod's `gpu-policy.io/last-checkpoint` is at or after
  its request (whole seconds compare as equal), else at `requested + max(60 s, 2 x save_s)`,
  capped by `checkpoint_deadline_s`;
- one the plan stops at its periodic checkpoint (`evict_after_s`) is awaited: its pods get the
  plan's time (`gpu-policy.io/checkpoint-awaited`) and the latest time it goes
  (`gpu-policy.io/evict-by`: `evict_after_s + save_s + 30 s` later). It is evicted once its last
  checkpoint is past the plan's time, or then;
- any other victim is evicted at once, as before.
Every victim is evicted with a grace period of the larger of its pod's own and `save_s + 30`
(that one capped by `checkpoint_deadline_s`), so a trainer that saves on SIGTERM has time to.

The state is the pods' annotations: the next round, a one-shot command or a new leader goes on
from what it finds, and a pod asked or awaited that a later plan keeps has them removed
(`WITHDRAWN`): its trainer trains on. A job the plan starts on the GPUs of an asked or awaited
victim stays gated (`holding`: `WaitingForCheckpoint`) while the victim waits, and in the round
that evicts it; after that the victims' pods hold their GPUs until they have ended, so no plan
starts it before (the planner's reason names them).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone

from gpu_policy.kubernetes.names import CHECKPOINT_AWAITED_ANNOTATION, CHECKPOINT_REQUESTED_ANNOTATION, EVICT_BY_ANNOTATION
from gpu_policy.kubernetes.read.pods import PodRef, PodView
from gpu_policy.model import Job
from gpu_policy.model.checkpointing import POD_GRACE_S, answer_deadline_s, checkpoint_wait_s, eviction_grace_s, rfc3339
from gpu_policy.model.cluster import WaitReason
from gpu_policy.model.plan import JobDecision, Plan

ASKED, AWAITED, PLAIN = "asked", "awaited", "plain"
#: the annotations a withdrawal removes
WITHDRAWN = {CHECKPOINT_REQUESTED_ANNOTATION: None, CHECKPOINT_AWAITED_ANNOTATION: None, EVICT_BY_ANNOTATION: None}


@dataclass(frozen=True)
class Verdict:
    """What this round does with one victim."""

    kind: str  # ASKED (it saves on request), AWAITED (at its periodic checkpoint) or PLAIN
    evict: bool  # evicted this round
    since: float | None = None  # when it was asked, or when the plan chose to await its checkpoint
    deadline: float | None = None  # evicted then at the latest
    mark: tuple[PodRef, ...] = ()  # its pods to annotate this round (not asked or awaited yet)
    result: str | None = None  # how its request ended this round: "saved" or "deadline" (the metric's)
    grace: dict[str, int] = field(default_factory=dict)  # pod uid -> the grace period its eviction gives

    def notes(self) -> dict[str, str]:
        """The annotations that ask it to save, or say its checkpoint is awaited."""
        if self.kind == ASKED:
            return {CHECKPOINT_REQUESTED_ANNOTATION: stamp(self.since)}
        return {CHECKPOINT_AWAITED_ANNOTATION: stamp(self.since), EVICT_BY_ANNOTATION: stamp(self.deadline)}

    def state(self) -> str:
        """Where it stands, in words (the waiting job's reason, the outcome)."""
        if self.evict:
            how = "it saved its checkpoint" if self.result != "deadline" else "no answer by its deadline"
            return f"asked at {stamp(self.since)}; {how}: evicted, its pods are ending"
        if self.kind == ASKED:
            return f"asked to save a checkpoint at {stamp(self.since)}; evicted once it has, at the latest at " \
                   f"{stamp(self.deadline)}"
        return f"stopped at its periodic checkpoint, awaited since {stamp(self.since)}; evicted once it has " \
               f"saved, at the latest at {stamp(self.deadline)}"


def stamp(t: float) -> str:
    """A time as the annotations write it: RFC 3339 UTC, whole seconds."""
    return rfc3339(datetime.fromtimestamp(t, timezone.utc))


def grace_period(own: int | None, save_s: float | None, cap: float) -> int:
    """The eviction's grace period in whole seconds (the contract's `eviction_grace_s`), from the
    pod's own (Kubernetes' 30 s when it has none)."""
    return math.ceil(eviction_grace_s(save_s, POD_GRACE_S if own is None else own, cap))


def judge(decision: JobDecision, job: Job | None, views: list[PodView], now: float, cap: float) -> Verdict:
    """What this round does with the victim `decision` (its job, its pods as read), at `now`;
    `cap` is `checkpoint_deadline_s`. What its pods carry decides first, so a victim asked or
    awaited is carried through whatever the plan now says of its checkpoint."""
    save_s = job.save_s if job is not None else None
    grace = {v.uid: grace_period(v.grace_s, save_s, cap) for v in views}
    if any(v.checkpoint_awaited is not None for v in views):
        return _awaited(views, now, grace)
    if any(v.checkpoint_requested is not None for v in views) or (views and job is not None and job.saves_on_request):
        return _asked(views, save_s, now, cap, grace)
    if decision.evict_after_s is not None and views:
        since = math.floor(now)
        deadline = since + math.ceil(checkpoint_wait_s(decision.evict_after_s, save_s))
        return Verdict(AWAITED, False, since, deadline, tuple(v.ref for v in views), grace=grace)
    return Verdict(PLAIN, True, grace=grace)


def _asked(views: list[PodView], save_s: float | None, now: float, cap: float, grace: dict[str, int]) -> Verdict:
    """A trainer that saves on request: asked once (pods not asked yet are asked now), evicted on
    every pod's answer or at the deadline of its latest request."""
    fresh = tuple(v.ref for v in views if v.checkpoint_requested is None)
    since = max([math.floor(v.checkpoint_requested) for v in views if v.checkpoint_requested is not None]
                + ([math.floor(now)] if fresh else []))
    deadline = since + answer_deadline_s(save_s, cap)
    if fresh:
        return Verdict(ASKED, False, since, deadline, fresh, grace=grace)
    if all(v.checkpoint_at is not None and math.floor(v.checkpoint_at) >= math.floor(v.checkpoint_requested)
           for v in views):
        return Verdict(ASKED, True, since, deadline, result="saved", grace=grace)
    if now >= deadline:
        return Verdict(ASKED, True, since, deadline, result="deadline", grace=grace)
    return Verdict(ASKED, False, since, deadline, grace=grace)


def _awaited(views: list[PodView], now: float, grace: dict[str, int]) -> Verdict:
    """A victim awaited at its periodic checkpoint: evicted once every pod's last checkpoint is
    past the plan's time, or at its `evict-by` (pods not marked yet get the same marks)."""
    since = max(math.floor(v.checkpoint_awaited) for v in views if v.checkpoint_awaited is not None)
    # no pod says when (its evict-by was removed): as if its checkpoint were due at the plan's time
    deadline = max((v.evict_by for v in views if v.evict_by is not None),
                   default=since + math.ceil(checkpoint_wait_s(0.0, None)))
    fresh = tuple(v.ref for v in views if v.checkpoint_awaited is None)
    saved = all(v.checkpoint_at is not None and math.floor(v.checkpoint_at) > since for v in views)
    evict = not fresh and (saved or now >= deadline)
    return Verdict(AWAITED, evict, since, deadline, fresh, "saved" if saved else "deadline", grace)


def claimants(plan: Plan, victims: dict[str, Verdict]) -> dict[str, list[str]]:
    """Each job the plan starts on a node of one of `victims` -> those victims (by name): the
    jobs that wait for their GPUs."""
    on_node: dict[str, set[str]] = defaultdict(set)
    for d in plan.jobs:
        if d.name in victims:
            for r in d.replicas:
                on_node[r.node].add(d.name)
    out = {}
    for d in plan.jobs:
        if d.action == "start":
            mine = sorted({v for r in d.replicas for v in on_node.get(r.node, ())})
            if mine:
                out[d.name] = mine
    return out


def holding(plan: Plan, verdicts: dict[str, Verdict]) -> dict[str, WaitReason]:
    """Each job the plan starts on the GPUs of an asked or awaited victim -> why it stays gated:
    the victims, when they were asked, and when they go."""
    waiting = {name: v for name, v in verdicts.items() if v.kind != PLAIN}
    return {job: WaitReason("WaitingForCheckpoint", "waits for the GPUs of " + "; ".join(
        f"{name} ({waiting[name].state()})" for name in victims) + "; released once their pods have ended")
        for job, victims in claimants(plan, waiting).items()}


def recheck_in(verdicts: dict[str, Verdict], now: float) -> float | None:
    """Seconds until the soonest deadline of a victim still waiting (None: none waits): plan
    again then, even if nothing changes meanwhile."""
    due = [v.deadline for v in verdicts.values() if not v.evict and v.deadline is not None]
    return max(0.0, min(due) - now) if due else None
