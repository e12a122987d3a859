"""A training process for the fault tests: the example trainer with a padded state
(so that saves take time), an optional slow writer hook, an optional disk that
holds only so many checkpoints (a full disk, without needing a real one), and optionally
its pod's notes (last-checkpoint) written as JSON lines to a file instead of a pod."""

import argparse
import errno
import glob
import json
import os
import sys
import time
from pathlib import Path

from gpu_policy.checkpoint import CheckpointPolicy, CheckpointStore, PreemptionGuard, run_training_steps
from gpu_policy.checkpoint.example import initial_state, make_step


class SlowStore(CheckpointStore):
    """Sleeps after each 1 MiB chunk of saves from `slow_from` on, touching `marker` first;
    with `disk_checkpoints`, the disk has room for that many checkpoints' data and no more."""

    def __init__(self, url: str, chunk_sleep: float, slow_from: int, marker: str | None, keep_last: int | None = 3,
                 disk_checkpoints: int | None = None, lock_wait_s: float = 0.0):
        super().__init__(url, keep_last=keep_last, lock_wait_s=lock_wait_s)
        self.chunk_sleep, self.slow_from, self.marker = chunk_sleep, slow_from, marker
        self.disk_checkpoints = disk_checkpoints
        self.saving = -1

    def _write_file(self, path, data):
        if self.disk_checkpoints is not None and path.endswith("/state.bin"):
            others = [p for p in glob.glob(f"{self.root}/ckpt-*/state.bin") if os.path.dirname(p) != os.path.dirname(path)]
            if len(others) >= self.disk_checkpoints:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super()._write_file(path, data)

    def save_bytes(self, step, data, metadata=None):
        self.saving = step
        return super().save_bytes(step, data, metadata)

    def _after_chunk(self):
        if self.saving >= self.slow_from:
            if self.marker:
                Path(self.marker).touch()
            time.sleep(self.chunk_sleep)


class FileNotes:
    """The pod's notes, one JSON line each, appended to `path` (the tests wait on them)."""

    def __init__(self, path: str):
        self.path = path

    def note_checkpoint(self, step, seconds, at=None):
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": step, "seconds": seconds, "at": at and at.isoformat()}) + "\n")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--pad-mib", type=int, default=0)
    p.add_argument("--chunk-sleep", type=float, default=0.0)
    p.add_argument("--slow-from", type=int, default=1 << 62)
    p.add_argument("--marker")
    p.add_argument("--step-seconds", type=float, default=0.0)
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument("--disk-checkpoints", type=int, default=None)
    p.add_argument("--wait-for-lock", type=float, default=0.0)
    p.add_argument("--notes", help="write the pod's notes to this file")
    p.add_argument("--checkpoint-every", type=float, default=0.0)
    args = p.parse_args()
    model_step = make_step(step_seconds=args.step_seconds)
    pad = bytes(args.pad_mib << 20)

    def step(state, k):
        return {"model": model_step(state["model"], k), "pad": state["pad"]}

    store = SlowStore(args.dir, args.chunk_sleep, args.slow_from, args.marker, args.keep_last or None,
                      args.disk_checkpoints, args.wait_for_lock)
    guard = PreemptionGuard(pod=FileNotes(args.notes)) if args.notes else None
    summary = run_training_steps(step, lambda: {"model": initial_state(), "pad": pad}, store, steps=args.steps,
                                 policy=CheckpointPolicy(interval_s=args.checkpoint_every), guard=guard)
    print(json.dumps(summary.to_dict()))
    return 0


if __name__ == "__main__":
    from gpu_policy.errors import GpuPolicyError

    try:
        sys.exit(main())
    except GpuPolicyError as e:
        print(f"trainer: {e}", file=sys.stderr)
        sys.exit(2)
