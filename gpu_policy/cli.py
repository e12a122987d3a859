"""The `gpu-policy` command. Exit status: 0 ok, 1 `--check` mismatch, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from gpu_policy.apply import apply_plan
from gpu_policy.check import differences
from gpu_policy.errors import GpuPolicyError
from gpu_policy.model import Scenario
from gpu_policy.planner import PlannerConfig
from gpu_policy.render import plan_table
from gpu_policy.scenario import dump_scenario, load_scenario


def _config(args: argparse.Namespace) -> PlannerConfig:
    return PlannerConfig(solver=args.solver, time_limit_s=args.time_limit,
                         candidate_nodes_per_job=args.candidate_nodes, max_moves=args.max_moves)


def _add_solver_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--solver", choices=("cbc", "highs"), default="cbc",
                   help="integer-program solver (default cbc; highs needs highspy)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="seconds each solver stage may run (default 10)")
    p.add_argument("--candidate-nodes", type=int, default=PlannerConfig.candidate_nodes_per_job, metavar="K",
                   help="most nodes considered per waiting job on large clusters "
                        f"(default {PlannerConfig.candidate_nodes_per_job})")
    p.add_argument("--max-moves", type=int, default=PlannerConfig.max_moves, metavar="N",
                   help="most running jobs one plan may move to make room (default "
                        f"{PlannerConfig.max_moves}; 0: no moves)")


def _settings(args: argparse.Namespace):
    from gpu_policy.telemetry import TelemetrySettings

    return TelemetrySettings(window_s=args.window)


def _cmd_plan(args: argparse.Namespace) -> int:
    from gpu_policy.telemetry import dcgm_source, plan_with_telemetry

    scenario = load_scenario(args.scenario)
    settings = _settings(args)
    result = plan_with_telemetry(scenario, dcgm_source(args.prometheus, scenario, settings), _config(args), settings)
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


def _cmd_telemetry(args: argparse.Namespace) -> int:
    from gpu_policy.render import telemetry_table
    from gpu_policy.telemetry import cluster_signals, dcgm_source

    if not args.prometheus and not args.scenario:
        print("gpu-policy telemetry: give --prometheus URL, or a --scenario FILE to simulate", file=sys.stderr)
        return 2
    scenario = load_scenario(args.scenario) if args.scenario else None
    settings = _settings(args)
    source = dcgm_source(args.prometheus, scenario, settings)
    known = scenario or Scenario(nodes=[], queues=[], jobs=[])  # no scenario: signals per GPU only
    signals = cluster_signals(source.collect(settings), known, settings)
    print(telemetry_table(signals, scenario))
    return 0


def _cmd_exporter(args: argparse.Namespace) -> int:
    from gpu_policy.telemetry.exporter import make_exporter

    server = make_exporter(load_scenario(args.scenario), args.host, args.port, args.hostname_label)
    host, port = server.server_address[:2]
    print(f"serving simulated dcgm-exporter metrics on http://{host}:{port}/metrics (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from gpu_policy.demo import run_demo

    print(run_demo(_config(args)))
    return 0


def _add_telemetry_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prometheus", metavar="URL", help="read DCGM telemetry from this Prometheus "
                                                         "(default: simulated from the scenario)")
    p.add_argument("--window", type=_positive(float), default=600.0, metavar="S",
                   help="seconds of telemetry judged (default 600)")


def _cmd_train_example(args: argparse.Namespace) -> int:
    from gpu_policy.checkpoint.example import accuracy, train_example

    summary = train_example(args.checkpoint_dir, args.steps, step_seconds=args.step_seconds,
                            interval_s=args.checkpoint_every, mean_time_to_preemption_s=args.mean_time_to_preemption,
                            grace_period_s=args.grace_period, keep_last=args.keep_last)
    report = summary.to_dict()
    if not summary.preempted:
        from gpu_policy.checkpoint import CheckpointStore

        store = CheckpointStore(args.checkpoint_dir)
        report["accuracy"] = accuracy(store.load(store.latest()))
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(json.dumps(report))
    # preempted: exit as the signal would have ended us (143 for SIGTERM), checkpoint saved
    return 128 + summary.signal if summary.preempted else 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from gpu_policy.sim.compare import compare, parse_policies, parse_seeds
    from gpu_policy.sim.openb import load_trace
    from gpu_policy.sim.report import comparison_json, comparison_table, plot_comparison

    policies, seeds = parse_policies(args.policies), parse_seeds(args.seeds)
    nodes, pods = load_trace(args.trace_dir)
    result = compare(nodes, pods, policies, seeds, args.inflate, args.window, args.workers,
                     _progress_bar("runs") if sys.stderr.isatty() else None)
    print(json.dumps(comparison_json(result), indent=2) if args.format == "json" else comparison_table(result))
    if args.plot:
        print(f"plot: {plot_comparison(result, args.plot)}", file=sys.stderr)
    return 0


def _progress_bar(unit: str):
    """A one-line progress bar on standard error, redrawn in place."""
    def show(done: int, total: int) -> None:
        filled = round(30 * done / total)
        end = "\n" if done == total else ""
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} {unit}", end=end, file=sys.stderr, flush=True)

    return show


def _positive(kind: type):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-policy", description="GPU fair share and packing for ML pipelines.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="plan one scenario file (YAML or JSON)")
    p.add_argument("scenario", help="scenario file")
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--check", action="store_true", help="compare with the file's expect: block; exit 1 on a difference")
    p.add_argument("--apply-to", metavar="OUT.yaml", help="write the scenario as it is after the plan")
    _add_solver_options(p)
    _add_telemetry_options(p)
    p.set_defaults(func=_cmd_plan)
    d = sub.add_parser("demo", help="the three seed problems on the embedded simulated cluster")
    _add_solver_options(d)
    d.set_defaults(func=_cmd_demo)
    tm = sub.add_parser("telemetry", help="per-GPU table of DCGM signals (idle, busy, XID, memory)")
    tm.add_argument("--scenario", metavar="FILE", help="a scenario: simulate its telemetry, or name the jobs")
    _add_telemetry_options(tm)
    tm.set_defaults(func=_cmd_telemetry)
    ex = sub.add_parser("dcgm-exporter-sim", help="serve a scenario's simulated DCGM metrics for Prometheus")
    ex.add_argument("scenario", help="scenario file (its telemetry: section sets the profiles)")
    ex.add_argument("--port", type=int, default=9400, help="port (default 9400, as dcgm-exporter)")
    ex.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ex.add_argument("--hostname-label", choices=("Hostname", "hostname"), default="Hostname",
                    help="label naming the node (older exporters: Hostname; newer: hostname)")
    ex.set_defaults(func=_cmd_exporter)
    sim = sub.add_parser("simulate", help="compare placement policies on a GPU trace (the FGD inflation experiment)")
    sim.add_argument("trace", choices=("openb",), help="trace format: openb (Alibaba cluster-trace-gpu-v2023)")
    sim.add_argument("--trace-dir", required=True, metavar="DIR", help="folder with the trace's CSV files")
    sim.add_argument("--policies", metavar="LIST", default="random,spread,best-fit,fgd,ours-online,ours-batched",
                     help="comma-separated: random, spread, best-fit, fgd, ours-online, ours-batched (default all)")
    sim.add_argument("--seeds", metavar="SEEDS", default="0-4", help="seeds, as a range 0-4 or a list 1,3 (default 0-4)")
    sim.add_argument("--inflate", type=_positive(float), default=1.0, metavar="X",
                     help="pods arrive until they ask for this multiple of GPU capacity (default 1.0)")
    sim.add_argument("--window", type=_positive(int), default=32, metavar="W",
                     help="pods per plan for ours-batched (default 32)")
    sim.add_argument("--plot", metavar="OUT.png", help="draw unallocated GPU %% against arrived workload %%")
    sim.add_argument("--format", choices=("table", "json"), default="table")
    sim.add_argument("--workers", type=_positive(int), default=None, metavar="N",
                     help="parallel processes (default: one per CPU)")
    sim.set_defaults(func=_cmd_simulate)
    t = sub.add_parser("train-example", help="train the example model in preemption-safe checkpointed steps")
    t.add_argument("--checkpoint-dir", required=True, metavar="URL", help="local path or fsspec URL")
    t.add_argument("--steps", type=_positive(int), required=True, help="steps in all (a rerun resumes)")
    t.add_argument("--step-seconds", type=float, default=0.0, help="extra seconds per step (for demos and tests)")
    t.add_argument("--checkpoint-every", type=float, default=None, metavar="S",
                   help="seconds between checkpoints (default: Young/Daly from the measured save time)")
    t.add_argument("--mean-time-to-preemption", type=_positive(float), default=3600.0, metavar="S",
                   help="expected seconds between preemptions (default 3600)")
    t.add_argument("--grace-period", type=_positive(float), default=None, metavar="S",
                   help="seconds between SIGTERM and SIGKILL (default $GPU_POLICY_TERMINATION_GRACE_S or 30)")
    t.add_argument("--keep-last", type=_positive(int), default=3, help="checkpoints to keep (default 3)")
    t.set_defaults(func=_cmd_train_example)
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
