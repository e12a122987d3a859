"""What moves cost and buy in the teams simulation: gpu-policy under the default protocol
with `PlannerConfig.max_moves` swept (the most jobs one plan may restart elsewhere).

    .venv/bin/python bench/teams_moves.py [--trace-dir ../shared/data/philly-vc] [--moves 0,1,2,3,4,8]

Each run takes about a minute. The figures are simulated time, so they do not depend on
how busy the machine is. Lower settings break the contract's move before preempt on
large clusters (docs/benchmarks-history.md, "Moves buy utilisation with lost work"): this is a
measurement of the trade-off, not a setting to use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_policy import PlannerConfig
from gpu_policy.sim.teams import Protocol, load_team_trace
from gpu_policy.sim.teams.engine import simulate
from gpu_policy.sim.teams.metrics import measure
from gpu_policy.sim.teams.ours import PlannerPolicy, default_config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=str(Path(__file__).resolve().parents[2] / "shared/data/philly-vc"))
    parser.add_argument("--moves", default="0,1,2,3,4,8")
    args = parser.parse_args()
    trace = load_team_trace(args.trace_dir)
    config = Protocol().config()
    quotas = trace.quotas(config.gpus)
    jobs = trace.between(config.start_s, config.window[1])
    print("MAX_MOVES  UTIL %  WORST GUARANTEE %  LONGEST BELOW S  PREEMPT  MOVES  LOST GPU-H  QUEUE MEAN H  JCT MEAN H")
    for most in [int(m) for m in args.moves.split(",")]:
        planner = PlannerConfig(**{**vars(default_config()), "max_moves": most})
        m = measure(simulate(jobs, quotas, PlannerPolicy(planner), config))
        print(f"{most:<10d} {100 * m.utilization:<7.2f} {100 * m.guarantee_share:<18.2f} "
              f"{m.longest_below_guarantee_s:<16.0f} {m.preemptions:<8d} {m.moves:<6d} {m.lost_gpu_hours:<11.1f} "
              f"{m.queueing.mean / 3600:<13.2f} {m.jct.mean / 3600:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
