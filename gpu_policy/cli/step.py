"""`gpu-policy step`: what one pipeline step needs, as JSON; it may wait, observing again."""

from __future__ import annotations

import argparse
import json
import sys

from gpu_policy.model.fields import INT64, MAX_GPUS_PER_NODE, MAX_REPLICAS, Invalid, job_gpus
from gpu_policy.cli._cluster import add_cluster_options, add_execute_options, open_from_args
from gpu_policy.cli._options import (add_solver_options, add_telemetry_options, number, planner_config, positive,
                                     telemetry_settings)

#: Longest --max-wait: a week of observing and planning
MAX_WAIT_S = 7 * 86400


def _job_gpus(value: float) -> float:
    """GPUs per replica as a scenario's job has them: a fraction below 1, or whole GPUs."""
    try:
        return job_gpus(value)
    except Invalid as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(sub) -> None:
    p = sub.add_parser("step", help="plan one pipeline step: where it runs and whether it may start (JSON)")
    add_cluster_options(p)
    p.add_argument("--job", required=True, metavar="NAME", help="the step's job: NAME or NAMESPACE/NAME")
    p.add_argument("--queue", required=True, metavar="Q", help="the team (queue) it runs for")
    p.add_argument("--gpus", required=True, type=number(0, MAX_GPUS_PER_NODE, above=True, then=_job_gpus),
                   metavar="N", help="GPUs per replica (below 1: a fraction)")
    p.add_argument("--replicas", type=positive(int, MAX_REPLICAS), default=1, metavar="R",
                   help="replicas, a gang (default 1)")
    p.add_argument("--priority", type=number(*INT64, whole=True), default=50, metavar="P",
                   help="the job's priority (default 50; 100 and above: not preemptible)")
    p.add_argument("--max-wait", type=number(0, MAX_WAIT_S), default=0.0, metavar="S",
                   help="seconds to keep observing and planning while it may not start, and waiting for GPUs "
                        "being attached for it (default 0: decide once)")
    p.add_argument("--poll", type=positive(float, 86400), default=30.0, metavar="S",
                   help="seconds between looks while waiting (default 30)")
    add_execute_options(p, "yes on k8s://, no on a scenario file")
    add_solver_options(p)
    add_telemetry_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.actions.cycle import wait_for_step
    from gpu_policy.model import Job

    cluster = open_from_args(args)
    job = cluster.step_job(Job(name=args.job, queue=args.queue, gpus=args.gpus, replicas=args.replicas,
                               priority=args.priority))
    decision = wait_for_step(cluster, job, planner_config(args), args.prometheus, telemetry_settings(args),
                             args.max_wait, args.poll, args.execute,
                             progress=lambda text: print(f"gpu-policy: {text}", file=sys.stderr, flush=True))
    print(json.dumps({"job": job.name, **decision.outputs(), "observed": decision.plan.observed,
                      "warnings": decision.plan.warnings}, indent=2))
    return 0
