"""`gpu-policy train-example`: the example trainer in preemption-safe checkpointed steps."""

from __future__ import annotations

import argparse
import json
import sys

from gpu_policy.cli._options import number, positive
from gpu_policy.errors import UsageError


def register(sub) -> None:
    t = sub.add_parser("train-example", help="train the example model in preemption-safe checkpointed steps")
    t.add_argument("--checkpoint-dir", required=True, metavar="URL", help="local path or fsspec URL")
    t.add_argument("--steps", type=number(1, 10 ** 12, whole=True), required=True,
                   help="steps in all (a rerun resumes)")
    t.add_argument("--step-seconds", type=number(0, 3600), default=0.0,
                   help="extra seconds per step (for demos and tests)")
    t.add_argument("--checkpoint-every", type=number(0, 10 ** 9), default=None, metavar="S",
                   help="seconds between checkpoints (default: Young/Daly from the measured save time)")
    t.add_argument("--mean-time-to-preemption", type=positive(float, 10 ** 9), default=3600.0, metavar="S",
                   help="expected seconds between preemptions (default 3600)")
    t.add_argument("--grace-period", type=positive(float, 10 ** 6), default=None, metavar="S",
                   help="seconds between SIGTERM and SIGKILL (default $GPU_POLICY_TERMINATION_GRACE_S or 30)")
    t.add_argument("--keep-last", type=number(1, 10 ** 6, whole=True), default=3,
                   help="checkpoints to keep (default 3)")
    t.add_argument("--wait-for-lock", type=number(0, 10 ** 6), default=0.0, metavar="S",
                   help="seconds to wait for another writer of the same checkpoints (default 0: fail at once)")
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.checkpoint import CheckpointStore
    from gpu_policy.checkpoint.example import accuracy, train_example
    from gpu_policy.checkpoint.lock import Unwritable

    store = CheckpointStore(args.checkpoint_dir, keep_last=args.keep_last, lock_wait_s=args.wait_for_lock)
    try:
        summary = train_example(args.checkpoint_dir, args.steps, step_seconds=args.step_seconds,
                                interval_s=args.checkpoint_every,
                                mean_time_to_preemption_s=args.mean_time_to_preemption,
                                grace_period_s=args.grace_period, store=store)  # in a pod: noted on it
    except Unwritable as e:
        raise UsageError(f"--checkpoint-dir: {e}") from None
    report = summary.to_dict()
    if not summary.preempted:
        report["accuracy"] = accuracy(store.load(store.latest()))
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(json.dumps(report))
    # preempted: exit as the signal would have ended us (143 for SIGTERM), checkpoint saved
    return 128 + summary.signal if summary.preempted else 0
