"""A deterministic example trainer: logistic regression in numpy.

Step ``k`` always uses the same mini-batch, so a run interrupted and resumed from
its checkpoints ends with the same weights, bit for bit, as one that never
stopped. The demo and the fault tests use it through `gpu-policy train-example`.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

from gpu_policy.checkpoint.guard import PodNotes, PreemptionGuard
from gpu_policy.checkpoint.policy import CheckpointPolicy
from gpu_policy.checkpoint.runner import TrainingSummary, run_training_steps
from gpu_policy.checkpoint.store import CheckpointStore

FEATURES, SAMPLES, BATCH = 16, 4096, 256


def make_data(seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, FEATURES))
    true_w = rng.normal(size=FEATURES)
    y = (x @ true_w + 0.5 * rng.normal(size=SAMPLES) > 0).astype(np.float64)
    return x, y


def initial_state() -> dict:
    import numpy as np

    return {"w": np.zeros(FEATURES), "b": 0.0}


def make_step(seed: int = 0, learning_rate: float = 0.5, step_seconds: float = 0.0) -> Callable[[Any, int], Any]:
    """A step function; `step_seconds` pads each step so tests can interrupt it."""
    import numpy as np

    x, y = make_data(seed)

    def step(state: dict, k: int) -> dict:
        rows = (k * BATCH + np.arange(BATCH)) % SAMPLES
        xb, yb = x[rows], y[rows]
        p = 1.0 / (1.0 + np.exp(-(xb @ state["w"] + state["b"])))
        grad = p - yb
        if step_seconds:
            time.sleep(step_seconds)
        return {"w": state["w"] - learning_rate * xb.T @ grad / BATCH,
                "b": state["b"] - learning_rate * float(grad.mean())}

    return step


_STEP: dict[str, Callable[[Any, int], Any]] = {}


def example_step(state: dict, k: int) -> dict:
    """Step `k` of the example trainer, as a plain function (`module:function` references)."""
    if "step" not in _STEP:
        _STEP["step"] = make_step()
    return _STEP["step"](state, k)


def accuracy(state: dict, seed: int = 0) -> float:
    x, y = make_data(seed)
    return float((((x @ state["w"] + state["b"]) > 0) == (y > 0.5)).mean())


def _progress_bar(k: int, steps: int | None) -> None:
    if steps:
        filled = int(30 * k / steps)
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] step {k}/{steps}", end="", file=sys.stderr, flush=True)


def train_example(checkpoint_dir: str, steps: int, step_seconds: float = 0.0, interval_s: float | None = None,
                  mean_time_to_preemption_s: float = 3600.0, grace_period_s: float | None = None,
                  keep_last: int | None = 3, store: CheckpointStore | None = None,
                  pod: PodNotes | None = None) -> TrainingSummary:
    """Train the example for `steps` steps in all; checkpoints are noted on `pod` (default:
    this process's own pod, when in one), and gpu-policy's checkpoint requests answered."""
    store = store or CheckpointStore(checkpoint_dir, keep_last=keep_last)
    policy = CheckpointPolicy(mean_time_to_preemption_s=mean_time_to_preemption_s, interval_s=interval_s)
    return run_training_steps(
        make_step(step_seconds=step_seconds), initial_state, store, steps=steps, policy=policy,
        guard=PreemptionGuard(grace_period_s, pod=pod), metadata={"trainer": "gpu-policy train-example"},
        progress=_progress_bar if sys.stderr.isatty() else None,
    )
