"""What a job's pods say about its run and its checkpoints: the scenario's `running_for_s`,
`waiting_for_s`, `checkpoint_age_s`, `checkpoint_every_s`, `save_s` and `saves_on_request`
(docs/kubernetes.md, "Pods -> jobs"), which the planner's rules of lost work, waiting for a
checkpoint, minimum runtime and preemption delay read.

A gang is judged by its least favourable replica: it started when its last replica did, its
checkpoint is as old as its oldest replica's, it saves in its slowest replica's time, and it
saves on request only when every replica's trainer does (each answers on its own pod).
"""

from __future__ import annotations

from gpu_policy.kubernetes.read.pod_view import PodView


def progress(pods: list[PodView], now: float, running: bool) -> dict:
    """The job's fields of time and checkpoints from its pods, seen at `now` (seconds since the
    epoch); a field no pod says anything about is None (unknown)."""
    started = [p.started for p in pods if p.started is not None]
    every = [p.checkpoint_every_s for p in pods if p.checkpoint_every_s is not None]
    save = [p.save_s for p in pods if p.save_s is not None]
    return {
        "running_for_s": _age(now, max(started)) if running and started else None,
        "waiting_for_s": None if running else _age(now, min(p.created for p in pods)),
        "checkpoint_age_s": _checkpoint_age(pods, now),
        "checkpoint_every_s": min(every, default=None),
        "save_s": max(save, default=None),
        "saves_on_request": all(p.saves_on_request for p in pods),
    }


def _checkpoint_age(pods: list[PodView], now: float) -> int | None:
    """Seconds since the oldest last checkpoint of the job's pods (None: none says one)."""
    saved = [p.checkpoint_at for p in pods if p.checkpoint_at is not None]
    return _age(now, min(saved)) if saved else None


def _age(now: float, since: float) -> int:
    """Whole seconds from `since` to `now`; 0 when a clock is behind."""
    return max(0, round(now - since))

