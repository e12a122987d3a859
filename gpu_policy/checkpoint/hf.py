"""Hugging Face `transformers.Trainer` joins gpu-policy's preemption protocol with one line:
``Trainer(..., callbacks=[GpuPolicyCallback()])`` (docs/checkpointing.md).

At each step's end the callback looks for gpu-policy's checkpoint request (and SIGTERM). On a
request it makes the Trainer save through its own checkpointing (``control.should_save``);
once saved (``on_save``) it notes the checkpoint on the pod and pauses: the Trainer trains no
further step until the request is withdrawn (then it trains on) or SIGTERM arrives. It pauses
rather than stops because a stopped Trainer returns from ``train()`` and the process ends: the
pod would end as if training were done, and a withdrawn request could not be taken back. On
SIGTERM it saves (unless nothing is new), stops the Trainer cleanly and, at the end of
``train()``, exits with 128 + the signal (143), as a process killed by it would, so a Job, a
pipeline or an operator retries the step, which resumes with ``train(resume_from_checkpoint=True)``.
"""

from __future__ import annotations

import time

from gpu_policy.checkpoint.guard import PreemptionGuard
from gpu_policy.extras import require

transformers = require("transformers", "gpu_policy.checkpoint.hf")


def any_rank(*flags: bool, device=None) -> tuple[bool, ...]:
    """Whether each flag is true on any process of a distributed run (as given in a single one),
    so that every rank saves and stops at the same step: a checkpoint is a collective operation."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flags
    votes = torch.tensor([int(f) for f in flags], device=device)
    dist.all_reduce(votes, op=dist.ReduceOp.MAX)
    return tuple(bool(v) for v in votes.tolist())


class GpuPolicyCallback(transformers.TrainerCallback):
    """Save on gpu-policy's request, note it on the pod, pause; save and stop on SIGTERM.

    `guard` watches the pod's annotations and the signals (default: a new `PreemptionGuard`);
    `exit_on_signal` (default true) ends the process with 128 + the signal after ``train()``
    has stopped and saved. `preempted` says whether a signal stopped training.
    """

    def __init__(self, guard: PreemptionGuard | None = None, exit_on_signal: bool = True):
        self.guard = guard if guard is not None else PreemptionGuard()
        self.exit_on_signal = exit_on_signal
        self._step_ended: float | None = None

    @property
    def preempted(self) -> bool:
        return self.guard.should_stop

    def on_train_begin(self, args, state, control, **kwargs):
        self.guard.__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        self._step_ended = time.monotonic()
        stop, asked = any_rank(self.guard.should_stop, self.guard.asked(), device=args.device)
        if stop or asked:
            control.should_save = True  # the Trainer saves right after this hook, then calls on_save
        if stop:
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        seconds = None if self._step_ended is None else time.monotonic() - self._step_ended
        self.guard.saved(state.global_step, seconds, note=state.is_local_process_zero)
        self.guard.pause()
        if any_rank(self.guard.should_stop, device=args.device)[0]:
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self.guard.__exit__(None, None, None)
        if self.exit_on_signal and self.guard.should_stop:
            raise SystemExit(128 + self.guard.signal)
