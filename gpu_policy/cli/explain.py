"""`gpu-policy explain JOB`: why a job waits and the smallest change that starts it, or why
it runs and what would stop it (gpu_policy.presentation.explain)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from gpu_policy.cli._cluster import add_cluster_options, open_from_args
from gpu_policy.cli._options import (add_solver_options, add_telemetry_options, number, planner_config,
                                     telemetry_settings)

#: Seconds after which explain says on stderr how far it got.
PROGRESS_AFTER_S = 2.0


def register(sub) -> None:
    p = sub.add_parser("explain", help="why a job waits and what would let it start (or what would stop it)")
    p.add_argument("job", metavar="JOB", help="the job's name (on k8s://: NAMESPACE/NAME)")
    add_cluster_options(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--max-plans", type=number(1, 1000, whole=True), default=40, metavar="N",
                   help="most plans of changed clusters to make (default 40)")
    add_solver_options(p)
    add_telemetry_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, clock=time.monotonic) -> int:
    from gpu_policy.actions.cycle import observe
    from gpu_policy.presentation.explain import explain

    obs = observe(open_from_args(args), args.prometheus, telemetry_settings(args))
    began = clock()

    def progress(line: str) -> None:
        if clock() - began > PROGRESS_AFTER_S:
            print(line, file=sys.stderr, flush=True)

    result = explain(obs.scenario, args.job, planner_config(args), obs.signals, args.max_plans, progress)
    print(json.dumps(result.to_dict(), indent=2) if args.format == "json" else explanation_text(result))
    return 0


def _nth(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def explanation_text(e) -> str:
    """An Explanation as lines a person reads."""
    code = f" [{e.code}]" if e.code else ""
    lines = [f"job {e.job} (queue {e.queue}): {e.action}{code}"]
    if e.runs_on:
        lines.append(f"{'runs on' if e.action == 'keep' else e.action + 's on'}: {e.runs_on}")
    if e.reason:
        lines.append(f"why: {e.reason}")
    if e.position is not None:
        lines.append(f"position: {_nth(e.position)} of {e.queue_waiting} waiting in {e.queue}; "
                     f"{_nth(e.cluster_position)} in the cluster's start order")
    if e.action == "wait":
        lines.append("what would let it start (each confirmed by planning the changed cluster):")
        lines += [f"  - {c.text}" for c in e.changes] or ["  nothing found within the plans allowed (--max-plans)"]
    elif e.action == "keep":
        lines.append("what would stop it (each confirmed by planning the changed cluster):")
        lines += [f"  - {c.text}" for c in e.changes] or [
            "  nothing: it is non-preemptible" if "non-preemptible" in e.reason else
            "  no waiting job that the plans tried would preempt or move it"]
    lines.append(f"({e.plans} plan{'s' if e.plans != 1 else ''} made)")
    return "\n".join(lines)
