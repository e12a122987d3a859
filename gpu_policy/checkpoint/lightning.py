"""PyTorch Lightning joins gpu-policy's preemption protocol with one line:
``Trainer(..., callbacks=[GpuPolicyCallback()])`` (docs/checkpointing.md).

After each training batch the callback looks for gpu-policy's checkpoint request. On one it
saves through the trainer's own ``trainer.save_checkpoint`` to ``last.ckpt`` in the checkpoint
folder (so ``trainer.fit(..., ckpt_path="last")`` resumes from it), notes it on the pod, and
pauses: no further batch until the request is withdrawn (it trains on) or SIGTERM arrives. It
pauses rather than stops, as the Hugging Face callback does: a stopped ``fit`` returns and the
pod would end as if training were done. On SIGTERM it saves the same way; Lightning's own
SIGTERM handling then ends ``fit`` with its ``SIGTERMException`` (a SystemExit), whose exit
status the callback sets to 128 + the signal (143), so the step is retried and resumes.
"""

from __future__ import annotations

import os
import signal
import time

from gpu_policy.checkpoint.guard import PreemptionGuard
from gpu_policy.extras import require

pl = require("lightning.pytorch", "gpu_policy.checkpoint.lightning")
_exceptions = require("lightning.pytorch.utilities.exceptions", "gpu_policy.checkpoint.lightning")

LAST = "last.ckpt"


class GpuPolicyCallback(pl.Callback):
    """Save on gpu-policy's request (and on SIGTERM), note it on the pod, pause.

    `dirpath` is where ``last.ckpt`` goes (default: the ModelCheckpoint callback's folder, else
    ``default_root_dir/checkpoints``); `guard` watches the pod's annotations (default: a new
    `PreemptionGuard` that also passes SIGTERM on to Lightning's own handler).
    """

    def __init__(self, dirpath: str | None = None, guard: PreemptionGuard | None = None):
        self.dirpath = dirpath
        self.guard = guard if guard is not None else PreemptionGuard(signals=(signal.SIGTERM,), chain=True)
        self.last_path: str | None = None
        """The checkpoint this callback wrote last."""

    @property
    def preempted(self) -> bool:
        return self.guard.should_stop

    def on_train_start(self, trainer, pl_module):
        self.guard.__enter__()  # after Lightning installed its SIGTERM handler: ours passes the signal on

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        stop = trainer.strategy.reduce_boolean_decision(self.guard.should_stop, all=False)
        if stop or trainer.strategy.reduce_boolean_decision(self.guard.asked(), all=False):
            self._save(trainer)
            self.guard.pause()
        if trainer.strategy.reduce_boolean_decision(self.guard.should_stop, all=False):
            trainer.should_stop = True

    def _save(self, trainer) -> None:
        folder = self.dirpath or (trainer.checkpoint_callback.dirpath if trainer.checkpoint_callback
                                  else os.path.join(trainer.default_root_dir, "checkpoints"))
        began, path = time.monotonic(), os.path.join(folder, LAST)
        trainer.save_checkpoint(path)
        self.last_path = path
        self.guard.saved(trainer.global_step, time.monotonic() - began, note=trainer.local_rank == 0)

    def on_train_end(self, trainer, pl_module):
        self.guard.__exit__(None, None, None)

    def on_exception(self, trainer, pl_module, exception):
        self.guard.__exit__(None, None, None)  # before Lightning restores the handlers it found
        if isinstance(exception, _exceptions.SIGTERMException) and self.guard.signal is not None:
            exception.code = 128 + self.guard.signal
