"""The `gpu-policy` command. Exit status: 0 ok, 1 `--check` mismatch, 2 bad input.

Each command lives in its own module with a `register(subparsers)` function that
adds its parser and sets `func`; this module only assembles them and maps
gpu-policy's own errors to exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from gpu_policy.cli import apply, demo, plan, reconcile, simulate, snapshot, step, telemetry, train
from gpu_policy.errors import GpuPolicyError

#: The command modules, in the order `gpu-policy --help` lists them.
COMMANDS = (plan, snapshot, apply, step, reconcile, demo, telemetry, simulate, train)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-policy", description="GPU fair share and packing for ML pipelines.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except GpuPolicyError as e:
        print(f"gpu-policy: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # a bad option value (PlannerConfig.validate)
        print(f"gpu-policy: {e}", file=sys.stderr)
        return 2


__all__ = ["build_parser", "main"]
