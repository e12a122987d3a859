"""Teams over time on the philly-vc workload: the default protocol, every policy in one run.

    .venv/bin/python bench/teams.py [--trace-dir ../shared/data/philly-vc] [--plot docs/img/teams.png]
        [--skips-days 21,29]

96 nodes (768 GPUs), days 21-35 after a 7-day warm-up, checkpoints every 30 min, rounds
every 300 s. Prints the comparison table of `gpu-policy simulate teams`, the issue's
targets with the figures that meet or miss them, and where the wall time went (the
planner's share of gpu-policy's run). `--skips-days D,...` also replays each day D (after
the same warm-up) planning every round, and counts the rounds with nothing changed since
the last that would have acted: the rounds the simulator skips.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gpu_policy.sim.teams import POLICIES, Protocol, compare, comparison_table, load_team_trace, plot_comparison
from gpu_policy.sim.teams.engine import simulate


def targets(c) -> list[str]:
    """The issue's targets, each with its figures and met / missed."""
    p = {m.policy: m for m in c.policies}
    ours, fifo, static, kai = p["gpu-policy"], p["fifo"], p["static"], p["kai-like"]
    quota_teams = {t: m for t, m in ours.teams.items() if m.guarantee_share is not None and m.jobs}
    worst = min(quota_teams.items(), key=lambda tm: tm[1].guarantee_share)
    longest = max(quota_teams.items(), key=lambda tm: tm[1].longest_below_guarantee_s)
    worse = c.worse_than_static["gpu-policy"]
    rows = [
        ("utilisation >= fifo's - 1 point", ours.utilization >= fifo.utilization - 0.01,
         f"{100 * ours.utilization:.2f}% vs fifo {100 * fifo.utilization:.2f}% "
         f"({100 * (ours.utilization - fifo.utilization):+.2f} points)"),
        ("utilisation >= static's + 10 points", ours.utilization >= static.utilization + 0.10,
         f"{100 * ours.utilization:.2f}% vs static {100 * static.utilization:.2f}% "
         f"({100 * (ours.utilization - static.utilization):+.2f} points)"),
        ("every team with a quota at its guarantee >= 99% of the time", worst[1].guarantee_share >= 0.99,
         f"worst {worst[0]} {100 * worst[1].guarantee_share:.3f}%"),
        ("never below the guarantee for more than two rounds (600 s)", longest[1].longest_below_guarantee_s <= 600,
         f"longest {longest[1].longest_below_guarantee_s:.0f} s ({longest[0]})"),
        ("no team's mean queueing delay worse than under static", not worse,
         f"teams worse: {', '.join(worse) or 'none'}"),
        ("GPU-hours lost to preemption <= half of kai-like's", ours.lost_gpu_hours <= kai.lost_gpu_hours / 2,
         f"{ours.lost_gpu_hours:.1f} vs kai-like {kai.lost_gpu_hours:.1f} "
         f"(ratio {ours.lost_gpu_hours / max(kai.lost_gpu_hours, 1e-9):.2f}; preemptions {ours.preemptions} vs "
         f"{kai.preemptions}, moves {ours.moves} vs {kai.moves}; victims whose team held no more than its fair "
         f"share {ours.victims_within_share} vs {kai.victims_within_share}; preempted jobs started again within "
         f"two rounds {ours.quick_restarts} vs {kai.quick_restarts})"),
        ("mean JCT <= kai-like's", ours.jct.mean <= kai.jct.mean,
         f"{ours.jct.mean / 3600:.2f} h vs kai-like {kai.jct.mean / 3600:.2f} h "
         f"(ratio {ours.jct.mean / kai.jct.mean:.3f})"),
    ]
    return [f"  {'met   ' if ok else 'MISSED'} {name}: {figures}" for name, ok, figures in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=str(Path(__file__).resolve().parents[2] / "shared/data/philly-vc"))
    parser.add_argument("--plot", default=None)
    parser.add_argument("--skips-days", default="")
    args = parser.parse_args()
    trace = load_team_trace(args.trace_dir)
    protocol = Protocol()
    began = time.perf_counter()
    result = compare(trace, protocol.default_policies(), protocol)
    total = time.perf_counter() - began
    print(comparison_table(result))
    print("\ntargets (gpu-policy, the default protocol):")
    print("\n".join(targets(result)))
    ours = next(m for m in result.policies if m.policy == "gpu-policy")
    stats = ours.policy_stats
    print(f"\nwall time: {total:.0f} s in all; " + ", ".join(f"{k} {v:.0f} s" for k, v in result.wall_s.items()))
    print(f"gpu-policy: {stats['plans']} plans ({stats['solver']}), {stats['plan_seconds']:.0f} s planning "
          f"({100 * stats['plan_seconds'] / result.wall_s['gpu-policy']:.0f}% of its run), slowest plan "
          f"{stats['slowest_plan_s']:.2f} s, plans at the time limit: {stats['plans_at_time_limit']}")
    if args.plot:
        print(f"plot: {plot_comparison(result, args.plot)}")
    for first in [float(d) for d in args.skips_days.split(",") if d.strip()]:
        day = Protocol(days=(first, first + 1))
        jobs = trace.between(day.config().start_s, day.config().window[1])
        print(f"\nday {first:g}, every round planned (after the same warm-up):")
        for name in ("kai-like", "gpu-policy"):
            cfg = day.config()
            cfg.skip_unchanged_rounds = False
            every = simulate(jobs, result.quotas, POLICIES[name](), cfg)
            skipping = simulate(jobs, result.quotas, POLICIES[name](), day.config())
            print(f"  {name}: {every.rounds} rounds planned, {skipping.rounds} when skipping; "
                  f"rounds with nothing changed that acted: {every.acted_unchanged}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
