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
    checkpoint_requests: int = 0
    """gpu-policy's requests to checkpoint that this run answered."""
    seconds_paused: float = 0.0
    """Seconds it trained nothing, having answered a request (until a signal or the withdrawal)."""

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
    caught by ``guard`` (a new `PreemptionGuard` when None). When gpu-policy asks for a
    checkpoint (the guard sees the request), it saves at the next step boundary and trains
    no further step until the request is withdrawn or a signal stops it. After each
    checkpoint the guard notes it on the pod, and ``on_checkpoint(k, seconds)`` is called;
    ``progress(k, steps)`` after each step. The store's writer lock is held from the start
    to the end, so a second writer on the same location fails before its first step.
    """
    if steps is None and time_budget_s is None:
        raise ValueError("give steps, time_budget_s or both: the loop needs a place to stop")
    policy = policy or CheckpointPolicy()
    store.acquire()  # one writer per location: a second one fails here, before any step
    try:
        with guard or PreemptionGuard() as g:
            return _Run(step_fn, store, policy, g, metadata, clock, on_checkpoint).train(
                init_state, steps, time_budget_s, progress)
    finally:
        store.release()


class _Run:
    """One run of the loop: the state, the step it has reached, and its checkpoints."""

    def __init__(self, step_fn, store: CheckpointStore, policy: CheckpointPolicy, guard: PreemptionGuard,
                 metadata: dict | None, clock: Callable[[], float], on_checkpoint):
        self.step_fn, self.store, self.policy, self.guard = step_fn, store, policy, guard
        self.metadata, self.clock, self.on_checkpoint = metadata, clock, on_checkpoint
        self.k, self.state, self.saved_at = 0, None, None
        self.last_save_s: float | None = None

    def train(self, init_state, steps: int | None, time_budget_s: float | None, progress) -> TrainingSummary:
        latest, g = self.store.latest(), self.guard
        if latest is None:
            self.state = init_state() if callable(init_state) else init_state
        else:
            self.k, self.state, self.saved_at = latest.step, self.store.load(latest), latest.step
        summary = TrainingSummary(first_step=self.k, last_step=self.k, resumed_from=self.saved_at,
                                  skipped_checkpoints=list(self.store.skipped))
        began = self.clock()
        self.policy.start(began)
        while not g.should_stop and (steps is None or self.k < steps) \
                and (time_budget_s is None or self.clock() - began < time_budget_s):
            if g.asked():  # gpu-policy needs the GPUs: save now (if anything is new), then wait
                if self.saved_at != self.k:
                    self.save(summary)
                else:
                    g.saved(self.k, self.last_save_s)
                g.pause()
                self.policy.start(self.clock())  # the interval counts from the resume: nothing new since
                continue
            self.state = self.step_fn(self.state, self.k)
            self.k += 1
            if progress:
                progress(self.k, steps)
            if self.policy.due(self.clock()) and not g.should_stop:
                self.save(summary)
        if self.saved_at != self.k:
            self.save(summary)
        if g.should_stop:
            summary.preempted, summary.signal = True, g.signal
            left = g.remaining()
            if left is not None and left < 0:
                log.warning("the checkpoint after a preemption signal finished %.1f s after the grace period", -left)
        summary.last_step = self.k
        summary.checkpoint_requests, summary.seconds_paused = g.requests_answered, g.seconds_paused
        return summary

    def save(self, summary: TrainingSummary) -> None:
        began = self.clock()
        self.store.save(self.k, self.state, self.metadata)
        seconds = self.clock() - began
        self.policy.record_save(seconds, self.clock())
        summary.checkpoints_written += 1
        summary.seconds_saving += seconds
        self.saved_at, self.last_save_s = self.k, seconds
        self.guard.saved(self.k, seconds)
        if self.on_checkpoint:
            self.on_checkpoint(self.k, seconds)
