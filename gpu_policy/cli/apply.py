"""`gpu-policy apply`: observe, plan and carry the plan out (a dry run unless --execute)."""

from __future__ import annotations

import argparse
import json

from gpu_policy.cli._cluster import (add_cluster_options, add_execute_options, add_release_option, check_release,
                                     observed_line, open_from_args, outcome_lines)
from gpu_policy.cli._options import add_solver_options, add_telemetry_options, planner_config, telemetry_settings
from gpu_policy.errors import GpuPolicyError
from gpu_policy.presentation.render import plan_table


def register(sub) -> None:
    a = sub.add_parser("apply", help="plan a cluster and carry the plan out: evict victims, reserve moved jobs' GPUs, attach and detach composable GPUs")
    add_cluster_options(a)
    add_execute_options(a, "no: print what would be done")
    add_release_option(a)
    a.add_argument("--apply-to", metavar="OUT.yaml",
                   help="a scenario file cluster: write the scenario as it is after the plan here")
    a.add_argument("--format", choices=("table", "json"), default="table")
    add_solver_options(a)
    add_telemetry_options(a)
    a.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.cluster import split_scheme
    from gpu_policy.actions.cycle import apply_plan_once

    check_release(args)
    cluster = open_from_args(args)
    execute = bool(args.execute)  # apply is a dry run unless told, on every cluster
    if split_scheme(args.cluster)[0] == "k8s":
        if args.apply_to:
            raise GpuPolicyError(f"--apply-to: applies to scenario files only, not to {args.cluster}")
    elif execute and not args.apply_to:
        raise GpuPolicyError(f"apply --execute on a scenario file needs --apply-to OUT.yaml "
                             f"({args.cluster} itself is never changed)")
    else:
        cluster.apply_to = args.apply_to
    result, outcomes = apply_plan_once(cluster, planner_config(args), args.prometheus, telemetry_settings(args), execute,
                                       args.release)
    if args.format == "json":
        print(json.dumps({"executed": execute, "outcomes": [o.to_dict() for o in outcomes],
                          "plan": result.to_dict()}, indent=2))
    else:
        print(plan_table(result))
        if result.observed:
            print(observed_line(result.observed))
        print("carried out:" if execute else "dry run (--execute carries it out):")
        print("\n".join(outcome_lines(outcomes)))
    return 0
