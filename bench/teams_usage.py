"""Fair share over time on the philly-vc workload (issue 40): every policy, gpu-policy with
usage history and without, and kai-time, in one run.

    .venv/bin/python bench/teams_usage.py [--trace-dir ../shared/data/philly-vc]
        [--half-life 604800] [--weight 1] [--seed 0] [--plot docs/img/teams-usage.png] [--json OUT.json]

The run is `gpu-policy simulate teams --trace-dir DIR --nodes 96 --days 21-35 --warmup-days 7
--usage-half-life 604800`: it prints that command's table, then the issue's targets with the
figures that meet or miss them, and draws the GPUs that the team that borrowed most in the
first week held, day by day, with and without history.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from gpu_policy.cli._options import progress_bar
from gpu_policy.extras import pyplot
from gpu_policy.sim.teams import Protocol, compare, comparison_json, comparison_table, load_team_trace


def targets(c) -> list[str]:
    """The issue's targets for gpu-policy with history, each with its figures and met / missed."""
    p = {m.policy: m for m in c.policies}
    ours, before, kai = p["gpu-policy"], p["gpu-policy-no-history"], p["kai-time"]
    err, err_before, err_kai = (m.entitlement_error.mean for m in (ours, before, kai))
    worse = c.worse_than_static["gpu-policy"]
    rows = [
        ("mean entitlement error <= 0.8x gpu-policy's without history", err <= 0.8 * err_before,
         f"{err:.4f} vs {err_before:.4f} (ratio {err / err_before:.2f}; worst {ours.entitlement_error.worst:.4f} vs "
         f"{before.entitlement_error.worst:.4f})"),
        ("mean entitlement error <= kai-time's", err <= err_kai,
         f"{err:.4f} vs kai-time {err_kai:.4f} (kai-like {p['kai-like'].entitlement_error.mean:.4f})"),
        ("utilisation within 1 point of gpu-policy's without history", abs(ours.utilization - before.utilization) <= 0.01,
         f"{100 * ours.utilization:.2f}% vs {100 * before.utilization:.2f}% "
         f"({100 * (ours.utilization - before.utilization):+.2f} points)"),
        ("every guarantee met", ours.guarantee_share >= 1.0,
         f"worst team {100 * ours.guarantee_share:.2f}%, longest below {ours.longest_below_guarantee_s:.0f} s"),
        ("no team worse than under static", not worse, f"teams worse: {', '.join(worse) or 'none'}"),
    ]
    return [f"  {'met   ' if ok else 'MISSED'} {name}: {figures}" for name, ok, figures in rows]


def borrower(c) -> str:
    """The team that held most beyond its quota in the first week without history."""
    before = next(m for m in c.policies if m.policy == "gpu-policy-no-history")
    return max(c.quotas, key=lambda t: (before.teams[t].surplus_gpu_h[0], t))


def plot_borrower(c, team: str, path: str) -> Path:
    """The team's GPUs held, day by day, with and without history (and under kai-time), against
    its quota and its fair share without usage."""
    plt = pyplot("--plot")
    p = {m.policy: m for m in c.policies}
    index = list(c.quotas).index(team)
    per_day = max(1, round(86_400 / p["gpu-policy"].bin_s))
    d0 = c.protocol.days[0]

    def daily(series: np.ndarray) -> np.ndarray:
        days = len(series) // per_day
        return series[:days * per_day].reshape(days, per_day).mean(axis=1)

    fig, ax = plt.subplots(figsize=(9, 4.6))
    fair = daily(p["gpu-policy-no-history"].fair_bins[index])
    x = d0 + np.arange(len(fair)) + 0.5
    ax.fill_between(x, daily(p["gpu-policy-no-history"].demand_bins[index]), step="mid", color="0.9", linewidth=0,
                    label="demand (without history)")
    ax.step(x, fair, where="mid", color="0.45", linestyle=":", label="fair share without usage (without history)")
    for name, colour in (("gpu-policy-no-history", "tab:orange"), ("gpu-policy", "tab:blue"), ("kai-time", "tab:green")):
        ax.step(x, daily(p[name].held_bins[index]), where="mid", color=colour, label=f"{name}: GPUs held")
    ax.axhline(c.quotas[team], color="black", linestyle="--", linewidth=0.9, label=f"quota {c.quotas[team]}")
    ax.axvline(d0 + 7, color="0.6", linewidth=0.8)
    ax.set_xlabel("day (daily means)", fontsize=8)
    ax.set_ylabel("GPUs", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3)
    ax.grid(alpha=0.3)
    hl = c.protocol.usage_half_life_s
    ax.set_title(f"team {team}, the heaviest borrower of the first week: its GPUs with usage history "
                 f"(half-life {hl / 86_400:g} days) and without", fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=str(Path(__file__).resolve().parents[2] / "shared/data/philly-vc"))
    parser.add_argument("--half-life", type=float, default=604_800.0)
    parser.add_argument("--weight", type=float, default=1.0)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--seed", type=int, default=0, help="the draw of trainers that save on request")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    protocol = Protocol(usage_half_life_s=args.half_life, usage_weight=args.weight, seed=args.seed)
    result = compare(load_team_trace(args.trace_dir), protocol.default_policies(), protocol,
                     progress_bar("% of the runs"))
    print(comparison_table(result))
    print("\ntargets (gpu-policy with history):")
    print("\n".join(targets(result)))
    if args.json:
        Path(args.json).write_text(json.dumps(comparison_json(result), indent=2))
    if args.plot:
        print(f"plot: {plot_borrower(result, borrower(result), args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
