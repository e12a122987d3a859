"""`gpu-policy status`: queues, waiting jobs and a plan made now, once or every S seconds."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

from gpu_policy.cli._cluster import add_cluster_options, open_from_args
from gpu_policy.cli._options import (add_solver_options, add_telemetry_options, number, planner_config,
                                     telemetry_settings)

#: ANSI: cursor home, clear the screen (a refresh in place).
CLEAR = "\x1b[H\x1b[2J"


def register(sub) -> None:
    p = sub.add_parser("status", help="queues, waiting jobs in start order, and what a plan made now does")
    add_cluster_options(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--watch", type=number(0, 86400, above=True), metavar="S",
                   help="look again every S seconds, refreshing the screen in place (until interrupted)")
    add_solver_options(p)
    add_telemetry_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
        rounds: int | None = None) -> int:
    """Print the status; with --watch, again every S seconds (`rounds` bounds the looks, for tests)."""
    cluster = open_from_args(args)
    done = 0
    while True:
        text = _look(args, cluster, clock)
        if args.watch:
            text = CLEAR + text
        print(text, flush=True)
        done += 1
        if not args.watch or (rounds is not None and done >= rounds):
            return 0
        sleep(args.watch)


def _look(args: argparse.Namespace, cluster, clock: Callable[[], float]) -> str:
    from gpu_policy.actions.cycle import observe, plan_observation
    from gpu_policy.presentation.status import cluster_status, status_text

    obs = observe(cluster, args.prometheus, telemetry_settings(args))
    result = plan_observation(obs, planner_config(args))
    st = cluster_status(obs.scenario, result, clock())
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return json.dumps(st.to_dict(), indent=2) if args.format == "json" else status_text(st)
