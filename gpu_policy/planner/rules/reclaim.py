"""Reclaim across queues: who may give, who may receive, in which tier, and that each
victim is needed above its queue's floor (the rows are in `gpu_policy.planner.reclaim`)."""

from __future__ import annotations

from gpu_policy.planner.rules.vocabulary import EPS, TIERS, QueueTree, Shares, cap, floor


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
