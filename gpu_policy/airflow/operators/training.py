"""CheckpointedTrainingOperator: a budget of training steps in the worker, resumable."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from gpu_policy.checkpoint.budget import run_step_budget

__all__ = ["CheckpointedTrainingOperator"]


class CheckpointedTrainingOperator(BaseOperator):
    """Run ``step_function`` (``module:function``, called as f(state, k)) for up to
    ``steps_per_run`` more steps, up to ``total_steps``, resuming from the newest
    checkpoint under ``checkpoint_uri``. Returns the step reached and the URI; a
    preemption signal saves a checkpoint and fails the task so that a retry resumes."""

    template_fields: Sequence[str] = ("checkpoint_uri", "step_function", "init_function")

    def __init__(self, *, checkpoint_uri: str, total_steps: int, steps_per_run: int,
                 step_function: str = "gpu_policy.checkpoint.example:example_step",
                 init_function: str = "gpu_policy.checkpoint.example:initial_state",
                 grace_period_s: float | None = None, keep_last: int | None = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, value in (("total_steps", total_steps), ("steps_per_run", steps_per_run)):
            if not isinstance(value, int) or value < 1:
                raise AirflowException(f"{type(self).__name__}: `{name}` must be a whole number >= 1, got {value!r}")
        self.checkpoint_uri = checkpoint_uri
        self.total_steps = total_steps
        self.steps_per_run = steps_per_run
        self.step_function = step_function
        self.init_function = init_function
        self.grace_period_s = grace_period_s
        self.keep_last = keep_last

    def execute(self, context) -> dict:
        try:
            summary = run_step_budget(self.checkpoint_uri, self.total_steps, self.steps_per_run, self.step_function,
                                      self.init_function, self.grace_period_s, self.keep_last)
        except ValueError as e:
            raise AirflowException(f"{type(self).__name__}: {e}") from e
        if summary.preempted:
            raise AirflowException(f"preempted at step {summary.last_step} (checkpoint saved); a retry resumes")
        self.log.info("steps %s -> %s", summary.first_step, summary.last_step)
        return {"step_reached": summary.last_step, "checkpoint_uri": self.checkpoint_uri, **summary.to_dict()}
