"""run_training_steps: a resumable loop of training steps with checkpoints.

It resumes from the newest checkpoint that verifies, runs steps until a step
count or a time budget, and saves when the policy says it is due, at the end,
and when a preemption signal arrives (within the grace period). The checkpoint
of step ``k`` holds the state after ``k`` steps, so a restart runs step ``k``
next and no step runs twice.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from gpu_policy.checkpoint.guard import PreemptionGuard
from gpu_policy.checkpoint.policy import CheckpointPolicy
from gpu_policy.checkpoint.store import CheckpointStore

log = logging.getLogger(__name__)


@dataclass
class TrainingSummary:
    first_step: int
    """Steps already done when this run started (0, or the resumed checkpoint's step)."""
    last_step: int
    """Steps done when this run stopped."""
    resumed_from: int | None
    checkpoints_written: int = 0
    seconds_saving: float = 0.0
    preempted: bool = False
    signal: int | None = None
    skipped_checkpoints: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def run_training_steps(step_fn: Callable[[Any, int], Any], init_state: Any, store: CheckpointStore, *,
                       steps: int | None = None, time_budget_s: float | None = None,
                       policy: CheckpointPolicy | None = None, guard: PreemptionGuard | None = None,
                       metadata: dict | None = None, clock: Callable[[], float] = time.monotonic,
                       progress: Callable[[int, int | None], None] | None = None,
                       on_checkpoint: Callable[[int, float], None] | None = None) -> TrainingSummary:
    """Run ``state = step_fn(state, k)`` for k = first, first + 1, ... with checkpoints.

    ``init_state`` is the state before step 0 (or a callable that makes it), used
    only when the store has no usable checkpoint. Stops after ``steps`` steps in
    all, after ``time_budget_s`` seconds of this run, or on a preemption signal
    caught by ``guard`` (a new `PreemptionGuard` when None). ``progress(k, steps)``
    is called after each step, ``on_checkpoint(k, seconds)`` after each checkpoint
    (gpu-policy's training notes it on its pod: `gpu_policy.kubernetes.write.own_pod`).
    The store's writer lock is held from the start to the end, so a second writer on
    the same location fails before its first step.
    """
    if steps is None and time_budget_s is None:
        raise ValueError("give steps, time_budget_s or both: the loop needs a place to stop")
    policy = policy or CheckpointPolicy()
    store.acquire()  # one writer per location: a second one fails here, before any step
    try:
        return _run(step_fn, init_state, store, steps, time_budget_s, policy, guard, metadata, clock, progress,
                    on_checkpoint)
    finally:
        store.release()


def _run(step_fn, init_state, store: CheckpointStore, steps: int | None, time_budget_s: float | None,
         policy: CheckpointPolicy, guard: PreemptionGuard | None, metadata: dict | None,
         clock: Callable[[], float], progress, on_checkpoint) -> TrainingSummary:
    latest = store.latest()
    if latest is None:
        k, state = 0, init_state() if callable(init_state) else init_state
    else:
        k, state = latest.step, store.load(latest)
    summary = TrainingSummary(first_step=k, last_step=k, resumed_from=latest.step if latest else None,
                              skipped_checkpoints=list(store.skipped))
    saved_at = k if latest else None

    def save() -> None:
        nonlocal saved_at
        began = clock()
        store.save(k, state, metadata)
        seconds = clock() - began
        policy.record_save(seconds, clock())
        summary.checkpoints_written += 1
        summary.seconds_saving += seconds
        saved_at = k
        if on_checkpoint:
            on_checkpoint(k, seconds)

    began = clock()
    policy.start(began)
    with guard or PreemptionGuard() as g:
        while not g.should_stop:
            if steps is not None and k >= steps:
                break
            if time_budget_s is not None and clock() - began >= time_budget_s:
                break
            state = step_fn(state, k)
            k += 1
            if progress:
                progress(k, steps)
            if policy.due(clock()) and not g.should_stop:
                save()
        if saved_at != k:
            save()
        if g.should_stop:
            summary.preempted, summary.signal = True, g.signal
            left = g.remaining()
            if left is not None and left < 0:
                log.warning("the checkpoint after a preemption signal finished %.1f s after the grace period", -left)
    summary.last_step = k
    return summary
