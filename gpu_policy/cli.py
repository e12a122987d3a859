"""The `gpu-policy` command. Exit status: 0 ok, 1 `--check` mismatch, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from gpu_policy.apply import apply_plan
from gpu_policy.check import differences
from gpu_policy.errors import GpuPolicyError
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.render import plan_table
from gpu_policy.scenario import dump_scenario, load_scenario


def _config(args: argparse.Namespace) -> PlannerConfig:
    return PlannerConfig(solver=args.solver, time_limit_s=args.time_limit,
                         candidate_nodes_per_job=args.candidate_nodes)


def _add_solver_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--solver", choices=("cbc", "highs"), default="cbc",
                   help="integer-program solver (default cbc; highs needs highspy)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="seconds each solver stage may run (default 10)")
    p.add_argument("--candidate-nodes", type=int, default=PlannerConfig.candidate_nodes_per_job, metavar="K",
                   help="most nodes considered per waiting job on large clusters "
                        f"(default {PlannerConfig.candidate_nodes_per_job})")


def _cmd_plan(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    result = plan(scenario, _config(args))
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


def _cmd_demo(args: argparse.Namespace) -> int:
    from gpu_policy.demo import run_demo

    print(run_demo(_config(args)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-policy", description="GPU fair share and packing for ML pipelines.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="plan one scenario file (YAML or JSON)")
    p.add_argument("scenario", help="scenario file")
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--check", action="store_true", help="compare with the file's expect: block; exit 1 on a difference")
    p.add_argument("--apply-to", metavar="OUT.yaml", help="write the scenario as it is after the plan")
    _add_solver_options(p)
    p.set_defaults(func=_cmd_plan)
    d = sub.add_parser("demo", help="the three seed problems on the embedded simulated cluster")
    _add_solver_options(d)
    d.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except GpuPolicyError as e:
        print(f"gpu-policy: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # a bad option value (PlannerConfig.validate)
        print(f"gpu-policy: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
