"""`gpu-policy step`: what one pipeline step needs, as JSON; it may wait, observing again."""

from __future__ import annotations

import argparse
import json
import sys

from gpu_policy.cli._cluster import add_cluster_options, add_execute_options, open_from_args
from gpu_policy.cli._options import (add_solver_options, add_telemetry_options, planner_config, positive,
                                     telemetry_settings)


def gpus(text: str) -> float:
    value = positive(float)(text)
    if value > 1 and not value.is_integer():
        raise argparse.ArgumentTypeError(f"must be a fraction below 1 or whole GPUs, got {text}")
    return int(value) if value.is_integer() else value


def register(sub) -> None:
    p = sub.add_parser("step", help="plan one pipeline step: where it runs and whether it may start (JSON)")
    add_cluster_options(p)
    p.add_argument("--job", required=True, metavar="NAME", help="the step's job: NAME or NAMESPACE/NAME")
    p.add_argument("--queue", required=True, metavar="Q", help="the team (queue) it runs for")
    p.add_argument("--gpus", required=True, type=gpus, metavar="N", help="GPUs per replica (below 1: a fraction)")
    p.add_argument("--replicas", type=positive(int), default=1, metavar="R", help="replicas, a gang (default 1)")
    p.add_argument("--priority", type=int, default=50, help="the job's priority (default 50; 100 and above: "
                                                             "not preemptible)")
    p.add_argument("--max-wait", type=float, default=0.0, metavar="S",
                   help="seconds to keep observing and planning while it may not start, and waiting for GPUs "
                        "being attached for it (default 0: decide once)")
    p.add_argument("--poll", type=positive(float), default=30.0, metavar="S",
                   help="seconds between looks while waiting (default 30)")
    add_execute_options(p, "yes on k8s://, no on a scenario file")
    add_solver_options(p)
    add_telemetry_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.cluster.compose import wait_for_step
    from gpu_policy.model import Job

    if args.max_wait < 0:
        raise argparse.ArgumentTypeError(f"--max-wait: must be >= 0 seconds, got {args.max_wait:g}")
    cluster = open_from_args(args)
    job = cluster.step_job(Job(name=args.job, queue=args.queue, gpus=args.gpus, replicas=args.replicas,
                               priority=args.priority))
    decision = wait_for_step(cluster, job, planner_config(args), args.prometheus, telemetry_settings(args),
                             args.max_wait, args.poll, args.execute,
                             progress=lambda text: print(f"gpu-policy: {text}", file=sys.stderr, flush=True))
    print(json.dumps({"job": job.name, **decision.outputs(), "observed": decision.plan.observed,
                      "warnings": decision.plan.warnings}, indent=2))
    return 0
