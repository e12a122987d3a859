"""Placement policies on the Alibaba openb trace: the FGD paper's inflation experiment.

    .venv/bin/python bench/openb_packing.py [--trace-dir ../shared/data/openb] [--seeds 0-4]
        [--plot docs/img/openb-inflation.png] [--sweep-best-fit]

Prints the comparison table of `gpu-policy simulate openb`, then each policy's allocation
ratio and latency relative to FGD's in the same run (these machines are noisy: compare
ratios). `--sweep-best-fit` also measures the packing price's best-fit weight (FGD growth
plus w times the free capacity left) for w in 0-0.5, placing greedily by the price.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from gpu_policy.packing.fragmentation import BEST_FIT_WEIGHT
from gpu_policy.sim.compare import compare, parse_seeds
from gpu_policy.sim.inflation import run
from gpu_policy.sim.openb import load_trace
from gpu_policy.sim.policies import FgdPolicy
from gpu_policy.sim.report import comparison_table, plot_comparison

POLICIES = ["random", "spread", "best-fit", "fgd", "ours-online", "ours-batched"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=str(Path(__file__).resolve().parents[2] / "shared/data/openb"))
    parser.add_argument("--seeds", default="0-4")
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--sweep-best-fit", action="store_true")
    args = parser.parse_args()
    nodes, pods = load_trace(Path(args.trace_dir))
    seeds = parse_seeds(args.seeds)
    result = compare(nodes, pods, POLICIES, seeds, 1.0, args.window)
    print(comparison_table(result))
    fgd = next(p for p in result.policies if p.policy == "fgd")
    print("\nrelative to fgd, same run: allocation ratio, p50 latency")
    for p in result.policies:
        print(f"  {p.policy:13s} {p.ratio_mean / fgd.ratio_mean:.4f}  {p.latency_p50_ms / fgd.latency_p50_ms:8.1f}x")
    if args.plot:
        print(f"plot: {plot_comparison(result, args.plot)}")
    if args.sweep_best_fit:
        print(f"\nbest-fit weight of the price (greedy placement, seeds {args.seeds}); "
              f"the shipped weight is {BEST_FIT_WEIGHT}")
        for weight in (0.0, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5):
            ratios = [run(nodes, pods, FgdPolicy(best_fit_weight=weight), s).allocation_ratio for s in seeds]
            print(f"  w={weight:<5g} mean {100 * np.mean(ratios):.2f}%  min {100 * min(ratios):.2f}  "
                  f"max {100 * max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
