"""One pipeline step of training: a budget of steps from the newest checkpoint on.

Pipelines (KFP, Airflow) run training as a chain of such steps; each resumes
where the last one stopped, so the step count grows and no step runs twice.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from gpu_policy.checkpoint.guard import PreemptionGuard
from gpu_policy.checkpoint.runner import TrainingSummary, run_training_steps
from gpu_policy.checkpoint.store import CheckpointStore


def resolve(reference: str, what: str) -> Callable[..., Any]:
    """The function named ``package.module:function``, or a ValueError naming `what`."""
    module_name, _, name = reference.partition(":")
    if not module_name or not name:
        raise ValueError(f"{what}: must be 'module:function', got {reference!r}")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{what}: cannot load {reference!r}: {e}") from e
    if not callable(function):
        raise ValueError(f"{what}: {reference!r} is not a function")
    return function


def run_step_budget(checkpoint_uri: str, total_steps: int, steps_per_run: int, step_function: str,
                    init_function: str, grace_period_s: float | None = None,
                    keep_last: int | None = 3,
                    on_checkpoint: Callable[[int, float], None] | None = None) -> TrainingSummary:
    """Run at most `steps_per_run` more steps, up to `total_steps`, from the newest checkpoint;
    `on_checkpoint(step, seconds)` after each checkpoint."""
    if total_steps < 1 or steps_per_run < 1:
        raise ValueError(f"total_steps and steps_per_run: must be >= 1, got {total_steps} and {steps_per_run}")
    step = resolve(step_function, "step_function")
    init = resolve(init_function, "init_function")
    store = CheckpointStore(checkpoint_uri, keep_last=keep_last)
    latest = store.latest()
    done = latest.step if latest else 0
    return run_training_steps(step, init, store, steps=min(total_steps, done + steps_per_run),
                              guard=PreemptionGuard(grace_period_s), metadata={"checkpoint_uri": checkpoint_uri},
                              on_checkpoint=on_checkpoint)
