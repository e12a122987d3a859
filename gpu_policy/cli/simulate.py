"""`gpu-policy simulate KIND`: the trace simulators, one subcommand per experiment.

`simulate openb` is the FGD paper's inflation experiment (docs/simulate.md). A new
experiment adds its own `register_*` function to `EXPERIMENTS`.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpu_policy.cli._options import positive, progress_bar


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
    p.add_argument("--seeds", metavar="SEEDS", default="0-4", help="seeds, as a range 0-4 or a list 1,3 (default 0-4)")
    p.add_argument("--inflate", type=positive(float), default=1.0, metavar="X",
                   help="pods arrive until they ask for this multiple of GPU capacity (default 1.0)")
    p.add_argument("--window", type=positive(int), default=32, metavar="W",
                   help="pods per plan for ours-batched (default 32)")
    p.add_argument("--variant", metavar="KIND[:SHARE]", default=None,
                   help="derive the pod list, per seed: gpuspec[:0.33], multigpu[:0.5], gpushare[:1.0], cpu[:2.5]; "
                        "several joined by commas (docs/simulate.md)")
    p.add_argument("--plot", metavar="OUT.png", help="draw unallocated GPU %% against arrived workload %%")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--workers", type=positive(int), default=None, metavar="N",
                   help="parallel processes (default: one per CPU)")
    p.set_defaults(func=run_openb)


def run_openb(args: argparse.Namespace) -> int:
    from gpu_policy.sim.compare import compare, parse_policies, parse_seeds
    from gpu_policy.sim.openb import load_trace
    from gpu_policy.sim.report import comparison_json, comparison_table, plot_comparison
    from gpu_policy.sim.variants import parse_variants

    policies, seeds = parse_policies(args.policies), parse_seeds(args.seeds)
    variants = parse_variants(args.variant) if args.variant is not None else []
    nodes, pods = load_trace(args.trace_dir)
    result = compare(nodes, pods, policies, seeds, args.inflate, args.window, args.workers,
                     progress_bar("runs") if sys.stderr.isatty() else None, variants)
    print(json.dumps(comparison_json(result), indent=2) if args.format == "json" else comparison_table(result))
    if args.plot:
        print(f"plot: {plot_comparison(result, args.plot)}", file=sys.stderr)
    return 0


#: One `register_*` per experiment under `gpu-policy simulate`.
EXPERIMENTS = (register_openb,)
