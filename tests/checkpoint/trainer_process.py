"""A training process for the fault tests: the example trainer with a padded state
(so that saves take time) and an optional slow writer hook."""

import argparse
import sys
import time
from pathlib import Path

from gpu_policy.checkpoint import CheckpointPolicy, CheckpointStore, run_training_steps
from gpu_policy.checkpoint.example import initial_state, make_step


class SlowStore(CheckpointStore):
    """Sleeps after each 1 MiB chunk of saves from `slow_from` on, touching `marker` first."""

    def __init__(self, url: str, chunk_sleep: float, slow_from: int, marker: str | None):
        super().__init__(url, keep_last=3)
        self.chunk_sleep, self.slow_from, self.marker = chunk_sleep, slow_from, marker
        self.saving = -1

    def save_bytes(self, step, data, metadata=None):
        self.saving = step
        return super().save_bytes(step, data, metadata)

    def _after_chunk(self):
        if self.saving >= self.slow_from:
            if self.marker:
                Path(self.marker).touch()
            time.sleep(self.chunk_sleep)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--pad-mib", type=int, default=0)
    p.add_argument("--chunk-sleep", type=float, default=0.0)
    p.add_argument("--slow-from", type=int, default=1 << 62)
    p.add_argument("--marker")
    p.add_argument("--step-seconds", type=float, default=0.0)
    args = p.parse_args()
    model_step = make_step(step_seconds=args.step_seconds)
    pad = bytes(args.pad_mib << 20)

    def step(state, k):
        return {"model": model_step(state["model"], k), "pad": state["pad"]}

    store = SlowStore(args.dir, args.chunk_sleep, args.slow_from, args.marker)
    run_training_steps(step, lambda: {"model": initial_state(), "pad": pad}, store, steps=args.steps,
                       policy=CheckpointPolicy(interval_s=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
