"""What a job's pods say about its run and its checkpoints: the scenario's `running_for_s`,
`waiting_for_s`, `checkpoint_age_s`, `checkpoint_every_s`, `save_s` and `saves_on_request`
(docs/kubernetes.md, "Pods -> jobs"), which the planner's rules of lost work, waiting for a
checkpoint, minimum runtime and preemption delay read.

A gang is judged by its least favourable replica: it started when its last replica did, its
checkpoint is as old as its oldest replica's, it saves in its slowest replica's time, and it
saves on request only when every replica's trainer does (each answers on its own pod).
"""

from __future__ import annotations

from typing import NamedTuple

from gpu_policy.kubernetes.read.pod_view import PodView


def progress(pods: list[PodView], now: float, running: bool) -> dict:
    """The job's fields of time and checkpoints from its pods, seen at `now` (seconds since the
    epoch); a field no pod says anything about is None (unknown)."""
    every = [p.checkpoint_every_s for p in pods if p.checkpoint_every_s is not None]
    save = [p.save_s for p in pods if p.save_s is not None]
    return {
        **ages(Moments.of(pods), now, running),
        "checkpoint_every_s": min(every, default=None),
        "save_s": max(save, default=None),
        "saves_on_request": all(p.saves_on_request for p in pods),
    }


class Moments(NamedTuple):
    """When a gang started (its last replica), was created (its first) and last checkpointed (its
    oldest replica's checkpoint): what its fields of time are counted from (None: no pod says)."""

    started: float | None
    created: float
    saved: float | None

    @classmethod
    def of(cls, pods: list[PodView]) -> Moments:
        started = [p.started for p in pods if p.started is not None]
        saved = [p.checkpoint_at for p in pods if p.checkpoint_at is not None]
        return cls(max(started, default=None), min(p.created for p in pods), min(saved, default=None))


def ages(moments: Moments, now: float, running: bool) -> dict:
    """The job fields that change with the time alone, at `now` (a look that keeps a job sets
    them anew)."""
    return {
        "running_for_s": _age(now, moments.started) if running and moments.started is not None else None,
        "waiting_for_s": None if running else _age(now, moments.created),
        "checkpoint_age_s": None if moments.saved is None else _age(now, moments.saved),
    }


def _age(now: float, since: float) -> int:
    """Whole seconds from `since` to `now`; 0 when a clock is behind."""
    return max(0, round(now - since))
