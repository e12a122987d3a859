"""The `gpu-policy` command. Exit status: 0 ok, 1 `--check` mismatch, 2 bad input.

Each command lives in its own module with a `register(subparsers)` function that
adds its parser and sets `func`; this module only assembles them and maps
gpu-policy's own errors to exit status 2 with one line on standard error. Any
other exception is a bug and stays a traceback (exit status 1). A closed
standard output (``gpu-policy plan ... | head``) ends the command quietly with
141, as SIGPIPE would.
"""

from __future__ import annotations

import argparse
import os
import sys

from gpu_policy._version import __version__
from gpu_policy.cli import apply, controller, demo, explain, plan, reconcile, simulate, snapshot, status, step, telemetry, train
from gpu_policy.cli._options import Parser
from gpu_policy.errors import GpuPolicyError, one_line
from gpu_policy.planner.gc_tuning import tune_gc

#: The command modules, in the order `gpu-policy --help` lists them.
COMMANDS = (plan, status, explain, snapshot, apply, step, reconcile, controller, demo, telemetry, simulate, train)

#: 128 + SIGPIPE: what a shell reports for a writer whose reader went away.
BROKEN_PIPE_STATUS = 141


def build_parser() -> Parser:
    parser = Parser(prog="gpu-policy", description="GPU fair share and packing for ML pipelines.")
    parser.add_argument("--version", action="version", version=f"gpu-policy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """Each subcommand's --help opens with the line `gpu-policy --help` lists it with
    (nested ones too: `simulate openb`), unless it has a description of its own."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:
                child = action.choices[listed.dest]
                child.description = child.description or listed.help
                _describe(child)


def main(argv: list[str] | None = None) -> int:
    tune_gc()
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except GpuPolicyError as e:
        print(one_line(f"gpu-policy: {e}"), file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader is gone: point stdout at /dev/null so the exit's flush stays quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_STATUS


__all__ = ["build_parser", "main"]
