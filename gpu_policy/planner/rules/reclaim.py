"""Reclaim across queues: who may give, who may receive, in which tier, and that each
victim is needed above its queue's floor (the rows are in `gpu_policy.planner.reclaim`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_policy.model import Job
from gpu_policy.planner.codes import Reason, gpu_count
from gpu_policy.planner.rules.vocabulary import EPS, FAIR, GUARANTEE, TIERS, QueueTree, Shares, cap, floor

if TYPE_CHECKING:
    from gpu_policy.planner.reasons import Judged


def why_wait(job: Job, judged: Judged) -> Reason | None:
    """The free GPUs cannot hold the job and reclaim made no room for it: GPUs of pods
    shutting down come back later, no queue it may reclaim from is above its floor where it
    would fit, or the plan ran out of time before deciding reclaim."""
    room = judged.no_room(job)
    if room is None:
        return None
    if judged.cut_off:  # reclaim may be possible: the solver stopped before deciding it
        return Reason("PlanCutShort", f"{room.text}; the plan's time limit ran out before reclaiming GPUs for it "
                                      "was decided")
    return Reason(room.code, f"{room.text}; {_shutting_down(judged) or _no_reclaim(job, judged)}")


def why_preempt(job: Job, judged: Judged, started: dict[str, list[Job]]) -> Reason | None:
    """The job's queue gives GPUs to other queues in this plan (`started`: the jobs the plan
    starts, per queue): who takes them, within which share, and what the giver keeps."""
    j, q = judged, job.queue
    tier = j.giving.get(q)
    if not tier:
        return None
    takers = sorted(r for r in started if r in j.receiving and r != q)
    parts = [_taker(j, j.tree.judged(r, q)[0][-1], tier) for r in takers]
    return Reason("ReclaimedGuarantee" if tier == GUARANTEE else "ReclaimedFairShare",
                  f"reclaimed for {', '.join(takers) or 'other queues'} ({tier} tier): "
                  f"{'; '.join(parts) + '; ' if parts else ''}{q} held {j.before[q]:g} GPUs, above its "
                  f"{_tier_share(tier)} of {floor(j.shares, q, tier):g}, and keeps {j.after[q]:g}")


def _taker(j: Judged, receiver: str, tier: str) -> str:
    """Where a receiving entity ends, against its cap in `tier`."""
    limit, share, after = cap(j.shares, receiver, tier), _tier_share(tier), j.after[receiver]
    if after <= limit + EPS:
        return f"{receiver} ends at {after:g}, within its {share} of {limit:g}"
    return (f"{receiver} ends at {after:g}: its claims within its {share} of {limit:g}, "
            "the rest borrowed on GPUs no claim could use")


def _tier_share(tier: str) -> str:
    return "fair share" if tier == FAIR else "deserved quota"


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
            f"{j.shares.fair[q]}, but no queue it may reclaim from holds GPUs above its floor where it would "
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
