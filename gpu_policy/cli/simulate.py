"""`gpu-policy simulate KIND`: the trace simulators, one subcommand per experiment.

`simulate openb` is the FGD paper's inflation experiment; `simulate teams` replays
a multi-team workload over weeks under several scheduling policies; `simulate topology`
places gangs with topology requests on blocks of racks (docs/simulate.md). A new experiment adds its own `register_*` function to
`EXPERIMENTS`.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpu_policy.cli._options import (add_input_options, input_limits, number, output_file, positive, progress_bar,
                                     write_output)
from gpu_policy.errors import UsageError
from gpu_policy.sim.teams.compare import DAY_S, MAX_DAY, MAX_NODES, MAX_SEED, MAX_USAGE_WEIGHT

def register(sub) -> None:
    sim = sub.add_parser("simulate", help="trace simulators: placement policies on a GPU trace")
    kinds = sim.add_subparsers(dest="experiment", required=True, metavar="KIND")
    for add in EXPERIMENTS:
        add(kinds)


def register_openb(kinds) -> None:
    p = kinds.add_parser("openb", help="the FGD inflation experiment on the Alibaba openb trace")
    p.add_argument("--trace-dir", required=True, metavar="DIR", help="folder with the trace's CSV files")
    p.add_argument("--policies", metavar="LIST", default="random,spread,best-fit,fgd,ours-online,ours-batched",
                   help="comma-separated: random, spread, best-fit, fgd, ours-online, ours-batched (default all)")
    p.add_argument("--seeds", metavar="SEEDS", default="0-4",
                   help="seeds, as a range 0-4 or a list 1,3 (default 0-4)")
    p.add_argument("--inflate", type=positive(float, 10), default=1.0, metavar="X",
                   help="pods arrive until they ask for this multiple of GPU capacity (default 1.0; at most 10)")
    p.add_argument("--window", type=number(1, 10_000, whole=True), default=32, metavar="W",
                   help="pods per plan for ours-batched (default 32)")
    p.add_argument("--variant", metavar="KIND[:SHARE]", default=None,
                   help="derive the pod list, per seed: gpuspec[:0.33], multigpu[:0.5], gpushare[:1.0], cpu[:2.5]; "
                        "several joined by commas (docs/simulate.md)")
    p.add_argument("--plot", metavar="OUT.png", type=output_file,
                   help="draw unallocated GPU %% against arrived workload %% (needs matplotlib)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--workers", type=number(1, 1024, whole=True), default=None, metavar="N",
                   help="parallel processes (default: one per CPU)")
    add_input_options(p)
    p.set_defaults(func=run_openb)


def run_openb(args: argparse.Namespace) -> int:
    from gpu_policy.sim.compare import compare, parse_policies, parse_seeds
    from gpu_policy.sim.openb import load_trace
    from gpu_policy.sim.report import comparison_json, comparison_table, plot_comparison
    from gpu_policy.sim.variants import parse_variants

    policies, seeds = parse_policies(args.policies), parse_seeds(args.seeds)
    variants = parse_variants(args.variant) if args.variant is not None else []
    if args.plot:
        _plot_needs_matplotlib()
    nodes, pods = load_trace(args.trace_dir, limits=input_limits(args))
    _check_arrivals(nodes, pods, args.inflate)
    result = compare(nodes, pods, policies, seeds, args.inflate, args.window, args.workers,
                     progress_bar("runs") if sys.stderr.isatty() else None, variants)
    print(json.dumps(comparison_json(result), indent=2) if args.format == "json" else comparison_table(result))
    if args.plot:
        write_output("--plot", args.plot, lambda path: plot_comparison(result, path))
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


#: Most pods one run may place: far above the openb trace's ~8,000, and a bound on the time a run takes.
MAX_ARRIVALS = 10_000_000


def _check_arrivals(nodes, pods, inflate: float) -> None:
    """A trace whose pods ask tiny GPU shares would need endless arrivals: refuse it up front."""
    counts = pods.counts
    mean_milli = sum(int(c) * t.gpu_milli for c, t in zip(counts, pods.types)) / max(1, int(counts.sum()))
    arrivals = inflate * nodes.gpu_capacity * 1000 / mean_milli
    if arrivals > MAX_ARRIVALS:
        raise UsageError(f"--inflate: this trace needs about {arrivals:,.0f} pod arrivals per run (its pods ask "
                         f"{mean_milli:.2f} thousandths of a GPU on average); at most {MAX_ARRIVALS:,}")


def register_teams(kinds) -> None:
    p = kinds.add_parser("teams", help="teams over weeks on the philly-vc workload: static, fifo, kai-like, kai-time, "
                                       "gpu-policy")
    p.add_argument("--trace-dir", required=True, metavar="DIR", help="folder with jobs.csv and vcs.csv")
    p.add_argument("--nodes", type=number(1, MAX_NODES, whole=True), default=96, metavar="N", help="nodes of 8 GPUs (default 96)")
    p.add_argument("--days", default="21-35", metavar="FIRST-LAST", help="the measured days (default 21-35)")
    p.add_argument("--warmup-days", type=number(0, MAX_DAY), default=7.0, metavar="D",
                   help="days simulated before the measured ones (default 7)")
    p.add_argument("--policies", metavar="LIST", default=None,
                   help="comma-separated: static, fifo, kai-like, kai-time, gpu-policy, gpu-policy-no-history "
                        "(default all; gpu-policy-no-history only with --usage-half-life)")
    p.add_argument("--checkpoint-every", default="1800", metavar="S",
                   help="seconds of progress between a job's checkpoints, or 'never' (default 1800)")
    p.add_argument("--restart-cost", type=number(0, DAY_S), default=60.0, metavar="S",
                   help="seconds a restarted job holds its GPUs before it makes progress (default 60)")
    p.add_argument("--round-every", type=number(1, DAY_S), default=300.0, metavar="S",
                   help="seconds between decision rounds (default 300)")
    p.add_argument("--save-s", type=number(0, DAY_S), default=None, metavar="S",
                   help="seconds every job takes to save a checkpoint (default 20 + 5 per GPU)")
    p.add_argument("--saves-on-request", type=number(0, 1), default=0.5, metavar="SHARE",
                   help="share of jobs whose trainer saves when asked and on SIGTERM (default 0.5)")
    p.add_argument("--seed", type=number(0, MAX_SEED, whole=True), default=0, metavar="N",
                   help="seeds the draw of the trainers that save on request (default 0)")
    p.add_argument("--reclaim-wait", type=number(0, DAY_S), default=300.0, metavar="S",
                   help="gpu-policy's policy.reclaim_wait_s: seconds a stop may wait for the victim's "
                        "checkpoint (default 300)")
    p.add_argument("--min-runtime", type=number(0, DAY_S), default=0.0, metavar="S",
                   help="every team's min_runtime_s: no job is a victim before it has run this long (default 0)")
    p.add_argument("--usage-half-life", type=number(1, MAX_DAY * DAY_S), default=None, metavar="S",
                   help="gpu-policy's policy.usage_half_life_s: its fair share counts each team's past usage, "
                        "decayed with this half-life; kai-time's usage decays with it too (default: gpu-policy "
                        "counts no history, kai-time's usage does not decay)")
    p.add_argument("--usage-weight", type=number(0, MAX_USAGE_WEIGHT), default=1.0, metavar="W",
                   help="gpu-policy's policy.usage_weight and kai-time's kValue (default 1)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--plot", metavar="OUT.png", type=output_file,
                   help="each team's GPUs over time and queueing delays (needs matplotlib)")
    add_input_options(p)
    p.set_defaults(func=run_teams)


def run_teams(args: argparse.Namespace) -> int:
    from gpu_policy.sim.teams import (Protocol, compare, comparison_json, comparison_table, load_team_trace,
                                      parse_checkpoint, parse_days, parse_policies, plot_comparison)

    protocol = Protocol(nodes=args.nodes, days=parse_days(args.days), warmup_days=args.warmup_days,
                        checkpoint_every_s=parse_checkpoint(args.checkpoint_every),
                        restart_cost_s=args.restart_cost, round_s=args.round_every, save_s=args.save_s,
                        saves_on_request=args.saves_on_request, seed=args.seed,
                        reclaim_wait_s=args.reclaim_wait, min_runtime_s=args.min_runtime,
                        usage_half_life_s=args.usage_half_life, usage_weight=args.usage_weight)
    protocol.check()
    policies = protocol.default_policies() if args.policies is None else parse_policies(args.policies)
    if args.plot:
        _plot_needs_matplotlib()
    trace = load_team_trace(args.trace_dir, limits=input_limits(args))
    result = compare(trace, policies, protocol, progress_bar("% of the runs") if sys.stderr.isatty() else None)
    print(json.dumps(comparison_json(result), indent=2) if args.format == "json" else comparison_table(result))
    if args.plot:
        write_output("--plot", args.plot, lambda path: plot_comparison(result, path))
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


def register_topology(kinds) -> None:
    p = kinds.add_parser("topology", help="gangs that ask for a rack or a block, placed by the planner, by Kueue's "
                                          "best fit and blind to topology")
    p.add_argument("--blocks", type=number(1, 1000, whole=True), default=4, metavar="N", help="blocks (default 4)")
    p.add_argument("--racks-per-block", type=number(1, 1000, whole=True), default=8, metavar="N",
                   help="racks in a block (default 8)")
    p.add_argument("--nodes-per-rack", type=number(1, 1000, whole=True), default=8, metavar="N",
                   help="nodes in a rack (default 8)")
    p.add_argument("--gpus", type=number(1, 64, whole=True), default=8, metavar="N", help="GPUs per node (default 8)")
    p.add_argument("--jobs", type=number(1, 100_000, whole=True), default=1000, metavar="N",
                   help="jobs arriving per seed (default 1000)")
    p.add_argument("--load", type=number(0.01, 10), default=1.1, metavar="X",
                   help="GPUs the arrivals ask on average, as a multiple of the cluster's (default 1.1)")
    p.add_argument("--round-every", type=number(1, 86_400), default=300.0, metavar="S",
                   help="seconds between decision rounds (default 300)")
    p.add_argument("--seeds", metavar="SEEDS", default="0-4",
                   help="seeds of the arrivals' generator, as a range 0-4 or a list 1,3 (default 0-4)")
    p.add_argument("--policies", metavar="LIST", default="gpu-policy,best-fit,topology-blind",
                   help="comma-separated: gpu-policy, best-fit, topology-blind (default all)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--plot", metavar="OUT.png", type=output_file,
                   help="per policy and seed: allocation at the first required wait, racks per gang, "
                        "the largest gangs' wait (needs matplotlib)")
    p.set_defaults(func=run_topology)


#: Most nodes a simulated cluster may have: a bound on the time a round takes.
MAX_TOPOLOGY_NODES = 10_000


def run_topology(args: argparse.Namespace) -> int:
    from gpu_policy.sim.compare import parse_seeds
    from gpu_policy.sim.topology.cluster import Shape
    from gpu_policy.sim.topology.compare import Protocol, compare, parse_policies
    from gpu_policy.sim.topology.report import comparison_json, comparison_table, plot_comparison

    shape = Shape(args.blocks, args.racks_per_block, args.nodes_per_rack, args.gpus)
    if shape.nodes > MAX_TOPOLOGY_NODES:
        raise UsageError(f"--blocks x --racks-per-block x --nodes-per-rack: at most {MAX_TOPOLOGY_NODES:,} nodes, "
                         f"got {shape.nodes:,}")
    protocol = Protocol(shape, args.jobs, args.load, args.round_every, tuple(parse_seeds(args.seeds)),
                        parse_policies(args.policies))
    if args.plot:
        _plot_needs_matplotlib()
    result = compare(protocol, progress_bar("runs") if sys.stderr.isatty() else None)
    print(json.dumps(comparison_json(result), indent=2) if args.format == "json" else comparison_table(result))
    if args.plot:
        write_output("--plot", args.plot, lambda path: plot_comparison(result, path))
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


def _plot_needs_matplotlib() -> None:
    """`--plot` is checked before the runs, not after them."""
    from gpu_policy.extras import require

    require("matplotlib", "--plot")


#: One `register_*` per experiment under `gpu-policy simulate`.
EXPERIMENTS = (register_openb, register_teams, register_topology)
