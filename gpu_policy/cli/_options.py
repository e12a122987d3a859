"""Options and helpers that several commands share."""

from __future__ import annotations

import argparse
import sys

from gpu_policy.planner import PlannerConfig
from gpu_policy.planner.config import SOLVERS


def positive(kind: type):
    """An argparse type: a number of `kind` that must be > 0."""
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def add_solver_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--solver", choices=SOLVERS, default=PlannerConfig.solver,
                   help=f"integer-program solver (default {PlannerConfig.solver})")
    p.add_argument("--time-limit", type=float, default=PlannerConfig.time_limit_s, metavar="S",
                   help="seconds for the whole plan: building, solving and writing it "
                        f"(default {PlannerConfig.time_limit_s:g})")
    p.add_argument("--candidate-nodes", type=int, default=PlannerConfig.candidate_nodes_per_job, metavar="K",
                   help="on large clusters, reclaim nodes considered per waiting replica that free GPUs "
                        f"cannot hold (default {PlannerConfig.candidate_nodes_per_job})")
    p.add_argument("--max-moves", type=int, default=PlannerConfig.max_moves, metavar="N",
                   help="most running jobs one plan may move to make room (default "
                        f"{PlannerConfig.max_moves}; 0: no moves)")


def planner_config(args: argparse.Namespace) -> PlannerConfig:
    return PlannerConfig(solver=args.solver, time_limit_s=args.time_limit,
                         candidate_nodes_per_job=args.candidate_nodes, max_moves=args.max_moves)


def add_telemetry_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prometheus", metavar="URL", help="read DCGM telemetry from this Prometheus "
                                                         "(default: simulated from the scenario)")
    p.add_argument("--window", type=positive(float), default=600.0, metavar="S",
                   help="seconds of telemetry judged (default 600)")


def telemetry_settings(args: argparse.Namespace):
    from gpu_policy.telemetry import TelemetrySettings

    return TelemetrySettings(window_s=args.window)


def progress_bar(unit: str):
    """A one-line progress bar on standard error, redrawn in place."""
    def show(done: int, total: int) -> None:
        filled = round(30 * done / total)
        end = "\n" if done == total else ""
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} {unit}", end=end, file=sys.stderr, flush=True)

    return show
