"""Options and helpers that several commands share.

Every option is checked here, at the edge, with the option's own name in the
message (``--inflate: must be a finite number > 0, got nan``); output files are
checked before any long work starts. Nothing past the parser needs to guard
against a bad option value.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from gpu_policy.errors import UsageError
from gpu_policy.planner import PlannerConfig
from gpu_policy.model.safe_load import MIB, InputLimits
from gpu_policy.planner.config import SOLVERS


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors raised as one-line `UsageError`s (exit status 2)."""

    def error(self, message: str):
        message = message.removeprefix("argument ")
        raise UsageError(f"{message} (see {self.prog} --help)")


def number(low: float, high: float, *, whole: bool = False, above: bool = False, then=None):
    """An argparse type for every numeric option: a finite number (whole if asked) within
    [low, high] (``above``: strictly above `low`), passed through ``then`` (a rule of the
    option's own that raises ``ArgumentTypeError``) if given. The bound is required, so no
    option lets a value overflow later (``1e30`` GPUs, ``--every 1e20``); argparse names the
    option in the one-line message (``--gpus: must be a finite number > 0 and <= 1,024, got '1e30'``)."""
    kind = "a whole number" if whole else "a finite number"
    rule = f" {'>' if above else '>='} {_shown(low)} and <= {_shown(high)}"

    def parse(text: str):
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or (value <= low if above else value < low) or value > high:
            shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text):,} characters)"
            raise argparse.ArgumentTypeError(f"must be {kind}{rule}, got {shown}")
        return value if then is None else then(value)

    parse.__name__ = "number"  # argparse names the type in its own messages
    parse.bounds = (low, high, whole, above)  # what the tests read to try every numeric option
    return parse


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def positive(kind: type, high: float):
    """An argparse type: a number of `kind` that must be > 0 and <= `high` (`number`)."""
    return number(0, high, whole=kind is int, above=True)


def output_file(text: str) -> Path:
    """An argparse type: a file that can be written, checked before the work that fills it."""
    path = Path(text)
    folder = path.parent
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {str(folder)!r} does not exist")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be written (permission denied)")
    return path


def write_output(option: str, path: Path, write) -> None:
    """Call ``write(path)``; a failure to write (disk full, /dev/full) is one line naming the option."""
    try:
        write(path)
    except OSError as e:
        raise UsageError(f"{option}: cannot write {path}: {e.strerror or e}") from None


def prometheus_url(text: str) -> str:
    """An argparse type: an http(s) URL with a host (or 'simulated')."""
    from urllib.parse import urlsplit

    if text == "simulated":
        return text
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        from gpu_policy.telemetry.http import redact_url

        raise argparse.ArgumentTypeError(f"must be an http:// or https:// URL with a host, got {redact_url(text)!r}")
    return text


def add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-input-mb", type=positive(float, 4096), default=InputLimits.max_bytes / MIB, metavar="MB",
                   help=f"largest input file read (default {InputLimits.max_bytes // MIB})")


def input_limits(args: argparse.Namespace) -> InputLimits:
    return InputLimits(max_bytes=int(args.max_input_mb * MIB))


def add_solver_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--solver", choices=SOLVERS, default=PlannerConfig.solver,
                   help=f"integer-program solver (default {PlannerConfig.solver})")
    p.add_argument("--time-limit", type=positive(float, 86400), default=PlannerConfig.time_limit_s, metavar="S",
                   help="seconds for the whole plan: building, solving and writing it "
                        f"(default {PlannerConfig.time_limit_s:g})")
    p.add_argument("--candidate-nodes", type=number(1, 100_000, whole=True),
                   default=PlannerConfig.candidate_nodes_per_job, metavar="K",
                   help="on large clusters, reclaim nodes considered per waiting replica that free GPUs "
                        f"cannot hold (default {PlannerConfig.candidate_nodes_per_job})")
    p.add_argument("--max-moves", type=number(0, 100_000, whole=True), default=PlannerConfig.max_moves, metavar="N",
                   help="most running jobs one plan may move to make room (default "
                        f"{PlannerConfig.max_moves}; 0: no moves)")


def planner_config(args: argparse.Namespace) -> PlannerConfig:
    if args.solver == "highs":
        from gpu_policy.extras import require

        require("highspy", "--solver highs")
    return PlannerConfig(solver=args.solver, time_limit_s=args.time_limit,
                         candidate_nodes_per_job=args.candidate_nodes, max_moves=args.max_moves)


def add_telemetry_options(p: argparse.ArgumentParser, without: str = "simulated from the scenario") -> None:
    p.add_argument("--prometheus", metavar="URL", type=prometheus_url,
                   help=f"read DCGM telemetry from this Prometheus (default: {without})")
    p.add_argument("--prometheus-insecure", action="store_true",
                   help="do not verify the TLS certificate of an https:// Prometheus (prints a warning)")
    p.add_argument("--window", type=positive(float, 7 * 86400), default=600.0, metavar="S",
                   help="seconds of telemetry judged (default 600)")


def telemetry_settings(args: argparse.Namespace):
    from gpu_policy.telemetry import TelemetrySettings

    if args.prometheus_insecure:
        print("gpu-policy: warning: --prometheus-insecure: the Prometheus TLS certificate is not verified",
              file=sys.stderr)
    return TelemetrySettings(window_s=args.window, verify_tls=not args.prometheus_insecure)


def progress_bar(unit: str):
    """A one-line progress bar on standard error, redrawn in place."""
    def show(done: int, total: int) -> None:
        filled = round(30 * done / total)
        end = "\n" if done == total else ""
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} {unit}", end=end, file=sys.stderr, flush=True)

    return show
