"""`gpu-policy plan`: plan a cluster (a scenario file, or k8s://), print it, check it, apply it."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from gpu_policy.model.apply import apply_plan
from gpu_policy.presentation.check import differences
from gpu_policy.cli._cluster import add_cluster_options, observed_line, open_from_args
from gpu_policy.cli._options import (add_solver_options, add_telemetry_options, output_file, planner_config,
                                     telemetry_settings, write_output)
from gpu_policy.errors import UsageError
from gpu_policy.presentation.render import plan_table
from gpu_policy.model.scenario_dump import dump_scenario


def register(sub) -> None:
    p = sub.add_parser("plan", help="plan a cluster: a scenario file (YAML or JSON) or k8s://")
    p.add_argument("scenario", nargs="?", help="scenario file (shorthand for --cluster FILE)")
    add_cluster_options(p, required=False)
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--check", action="store_true", help="compare with the file's expect: block; exit 1 on a difference")
    p.add_argument("--apply-to", metavar="OUT.yaml", type=output_file,
                   help="write the scenario as it is after the plan")
    add_solver_options(p)
    add_telemetry_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.actions.cycle import observe, plan_observation

    if bool(args.scenario) == bool(args.cluster):
        raise UsageError("plan: give a scenario FILE or --cluster CLUSTER (one of them)")
    name = args.cluster or args.scenario
    settings = telemetry_settings(args)
    config = planner_config(args)
    obs = observe(open_from_args(args, name), args.prometheus, settings)
    if args.check and obs.scenario.expect is None:
        raise UsageError(f"{name}: --check needs an expect: block")
    result = plan_observation(obs, config)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    elif args.format == "yaml":
        print(yaml.safe_dump(result.to_dict(), sort_keys=False), end="")
    else:
        print(plan_table(result))
        if result.observed:
            print(observed_line(result.observed))
    if args.apply_to:
        after = apply_plan(obs.scenario, result)
        write_output("--apply-to", args.apply_to, lambda path: dump_scenario(after, path))
    if args.check:
        diff = differences(result, obs.scenario.expect)
        for line in diff:
            print(f"check: {line}", file=sys.stderr)
        print(f"check: {'FAILED' if diff else 'passed'} ({name})", file=sys.stderr)
        return 1 if diff else 0
    return 0
