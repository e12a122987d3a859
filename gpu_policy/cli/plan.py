"""`gpu-policy plan`: plan one scenario, print it, check it, apply it."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from gpu_policy.apply import apply_plan
from gpu_policy.check import differences
from gpu_policy.cli._options import (add_solver_options, add_telemetry_options, planner_config,
                                     telemetry_settings)
from gpu_policy.render import plan_table
from gpu_policy.scenario import dump_scenario, load_scenario


def register(sub) -> None:
    p = sub.add_parser("plan", help="plan one scenario file (YAML or JSON)")
    p.add_argument("scenario", help="scenario file")
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--check", action="store_true", help="compare with the file's expect: block; exit 1 on a difference")
    p.add_argument("--apply-to", metavar="OUT.yaml", help="write the scenario as it is after the plan")
    add_solver_options(p)
    add_telemetry_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.telemetry import dcgm_source, plan_with_telemetry

    scenario = load_scenario(args.scenario)
    settings = telemetry_settings(args)
    result = plan_with_telemetry(scenario, dcgm_source(args.prometheus, scenario, settings), planner_config(args),
                                 settings)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    elif args.format == "yaml":
        print(yaml.safe_dump(result.to_dict(), sort_keys=False), end="")
    else:
        print(plan_table(result))
    if args.apply_to:
        dump_scenario(apply_plan(scenario, result), args.apply_to)
    if args.check:
        if scenario.expect is None:
            print(f"{args.scenario}: --check needs an expect: block", file=sys.stderr)
            return 2
        diff = differences(result, scenario.expect)
        for line in diff:
            print(f"check: {line}", file=sys.stderr)
        print(f"check: {'FAILED' if diff else 'passed'} ({args.scenario})", file=sys.stderr)
        return 1 if diff else 0
    return 0
