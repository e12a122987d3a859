"""One pipeline step of training: a budget of steps from the newest checkpoint on.

Pipelines (KFP, Airflow) run training as a chain of such steps; each resumes
where the last one stopped, so the step count grows and no step runs twice.

``step_function`` and ``init_function`` are pipeline parameters, so whoever can
start a run chooses them; importing and calling a module runs its code. They
are therefore resolved only inside module prefixes the deployer trusts:
``gpu_policy`` and the prefixes in ``$GPU_POLICY_TRUSTED_MODULES``
(comma-separated; set it in the training image to the trainer's own package),
plus those a caller passes as ``trusted_modules``. The check happens before any
import (docs/security.md).
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any, Callable, Iterable

from gpu_policy.checkpoint.guard import PodNotes, PreemptionGuard
from gpu_policy.checkpoint.runner import TrainingSummary, run_training_steps
from gpu_policy.checkpoint.store import CheckpointStore
from gpu_policy.errors import UsageError

TRUSTED_MODULES_ENV = "GPU_POLICY_TRUSTED_MODULES"
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def trusted_prefixes(extra: Iterable[str] = ()) -> list[str]:
    """gpu_policy, the deployer's `$GPU_POLICY_TRUSTED_MODULES`, and `extra`."""
    from_env = os.environ.get(TRUSTED_MODULES_ENV, "")
    return ["gpu_policy", *(p.strip() for p in from_env.split(",") if p.strip()), *extra]


def resolve(reference: str, what: str, trusted_modules: Iterable[str] = ()) -> Callable[..., Any]:
    """The function named ``package.module:function`` inside a trusted prefix, or a
    `UsageError` naming `what`."""
    module_name, _, name = str(reference).partition(":")
    if not _MODULE.match(module_name) or not name.isidentifier():
        raise UsageError(f"{what}: must be 'module:function', got {str(reference)[:80]!r}")
    prefixes = trusted_prefixes(trusted_modules)
    if not any(module_name == p or module_name.startswith(p + ".") for p in prefixes):
        raise UsageError(f"{what}: module {module_name!r} is not under a trusted prefix ({', '.join(prefixes)}); "
                         f"the deployer adds the trainer's package to ${TRUSTED_MODULES_ENV}")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"{what}: cannot load {reference!r}: {e}") from e
    if not callable(function):
        raise UsageError(f"{what}: {reference!r} is not a function")
    return function


def run_step_budget(checkpoint_uri: str, total_steps: int, steps_per_run: int, step_function: str,
                    init_function: str, grace_period_s: float | None = None,
                    keep_last: int | None = 3, trusted_modules: Iterable[str] = (),
                    lock_wait_s: float = 0.0, pod: PodNotes | None = None) -> TrainingSummary:
    """Run at most `steps_per_run` more steps, up to `total_steps`, from the newest checkpoint,
    noting each checkpoint on `pod` (default: this process's own pod, when in one)."""
    if total_steps < 1 or steps_per_run < 1:
        raise UsageError(f"total_steps and steps_per_run: must be >= 1, got {total_steps} and {steps_per_run}")
    step = resolve(step_function, "step_function", trusted_modules)
    init = resolve(init_function, "init_function", trusted_modules)
    store = CheckpointStore(checkpoint_uri, keep_last=keep_last, lock_wait_s=lock_wait_s)
    latest = store.latest()
    done = latest.step if latest else 0
    return run_training_steps(step, init, store, steps=min(total_steps, done + steps_per_run),
                              guard=PreemptionGuard(grace_period_s, pod=pod),
                              metadata={"checkpoint_uri": checkpoint_uri})
