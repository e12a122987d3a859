"""Scale of the composition decision: the planner scale instance (bench/instances.py, 1,000
nodes x 8 GPUs, about 93% full, most waiting work needing reclaim) with a few of its nodes
composable, against pools of very different sizes.

    .venv/bin/python bench/compose_scale.py [--nodes 1000] [--composable 8] [--runs 5]

Prints, per case, the median of `--runs` plans (HiGHS): build and solve seconds of the plan
returned, total seconds of the `plan()` call (every plan it made: one whose compositions
change the capacity fair shares count is made again, docs/policy.md), the program's size,
and what the plan decided (GPUs attached, starts, preemptions), then the ratio of each
case's total to the instance without a `composable:` section, all taken in the same run. Composable nodes get their own variables, so the program's size must not
change with the pool's: the `vars` and `cons` columns of one `max_gpus` are equal
whatever the pool holds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from gpu_policy import PlannerConfig, parse_scenario, plan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.instances import GPUS_PER_NODE, scale_instance  # noqa: E402

#: (pool GPUs, max_gpus of each composable node); None: no composable section.
CASES = [None, (8, 16), (1_000, 16), (90_000, 16), (1_000, 64), (90_000, 1024)]


def instance(nodes: int, composable: int, case: tuple[int, int] | None) -> dict:
    data = scale_instance(nodes)
    for node in data["nodes"]:
        node["gpu_model"] = "A100"
    if case is not None:
        pool, most = case
        step = max(1, nodes // composable)
        data["composable"] = {"pools": [{"model": "A100", "free": pool}],
                              "nodes": [{"name": data["nodes"][i]["name"], "max_gpus": max(most, GPUS_PER_NODE)}
                                        for i in range(0, step * composable, step)]}
    return data


def measure(scenario, runs: int) -> dict:
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        result = plan(scenario, PlannerConfig(time_limit_s=60))
        samples.append((result.solver.build_seconds, result.solver.seconds, time.perf_counter() - began))
        print(".", end="", file=sys.stderr, flush=True)
    build, solve, total = (statistics.median(s[i] for s in samples) for i in range(3))
    return {"build": build, "solve": solve, "total": total, "vars": result.solver.variables,
            "cons": result.solver.constraints, "attached": result.summary["attached"],
            "starts": result.summary["starts"], "preempt": result.summary["preemptions"],
            "status": result.solver.status}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--composable", type=int, default=8, help="how many nodes are composable")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for case in CASES:
        scenario = parse_scenario(instance(args.nodes, args.composable, case), f"compose-scale-{case}")
        rows.append((case, measure(scenario, args.runs)))
    print(file=sys.stderr)
    base = rows[0][1]["total"]
    print(f"{args.nodes} nodes, {args.composable} composable; median of {args.runs} plans (HiGHS)")
    print(f"{'pool':>7} {'max_gpus':>8} {'build s':>8} {'solve s':>8} {'total s':>8} {'vars':>6} {'cons':>6} "
          f"{'attached':>8} {'starts':>6} {'preempt':>7} {'x none':>7}  status")
    for case, r in rows:
        pool, most = ("-", "-") if case is None else (f"{case[0]:,}", f"{case[1]:,}")
        print(f"{pool:>7} {most:>8} {r['build']:8.3f} {r['solve']:8.3f} {r['total']:8.3f} {r['vars']:6d} "
              f"{r['cons']:6d} {r['attached']:8d} {r['starts']:6d} {r['preempt']:7d} {r['total'] / base:7.2f}  "
              f"{r['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
