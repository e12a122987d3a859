"""`gpu-policy plan`: plan one scenario, print it, check it, apply it."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from gpu_policy.apply import apply_plan
from gpu_policy.check import differences
from gpu_policy.errors import UsageError
from gpu_policy.cli._options import (add_input_options, add_solver_options, add_telemetry_options, input_limits,
                                     output_file, planner_config, telemetry_settings, write_output)
from gpu_policy.render import plan_table
from gpu_policy.scenario import dump_scenario, load_scenario


def register(sub) -> None:
    p = sub.add_parser("plan", help="plan one scenario file (YAML or JSON)")
    p.add_argument("scenario", help="scenario file")
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--check", action="store_true", help="compare with the file's expect: block; exit 1 on a difference")
    p.add_argument("--apply-to", metavar="OUT.yaml", type=output_file,
                   help="write the scenario as it is after the plan")
    add_solver_options(p)
    add_telemetry_options(p)
    add_input_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.telemetry import dcgm_source, plan_with_telemetry

    scenario = load_scenario(args.scenario, input_limits(args))
    if args.check and scenario.expect is None:
        raise UsageError(f"{args.scenario}: --check needs an expect: block")
    settings = telemetry_settings(args)
    config = planner_config(args)
    result = plan_with_telemetry(scenario, dcgm_source(args.prometheus, scenario, settings), config, settings)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    elif args.format == "yaml":
        print(yaml.safe_dump(result.to_dict(), sort_keys=False), end="")
    else:
        print(plan_table(result))
    if args.apply_to:
        after = apply_plan(scenario, result)
        write_output("--apply-to", args.apply_to, lambda path: dump_scenario(after, path))
    if args.check:
        diff = differences(result, scenario.expect)
        for line in diff:
            print(f"check: {line}", file=sys.stderr)
        print(f"check: {'FAILED' if diff else 'passed'} ({args.scenario})", file=sys.stderr)
        return 1 if diff else 0
    return 0
