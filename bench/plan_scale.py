"""Scale benchmark of the planner: 1,000 nodes x 8 GPUs, 10 queues, 4,000 running
jobs and 200 waiting ones (the 4,000-workload scale test of the seed talk).

Prints, per solver, the median of 5 runs of: model build, solve and total
seconds, with the program's size and what the plan decided. The figures go to
docs/benchmarks.md with this command:

    .venv/bin/python bench/plan_scale.py [--runs 5] [--solvers cbc,highs] [--candidate-nodes K]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import pulp

from gpu_policy import PlannerConfig, parse_scenario, plan

NODES, GPUS, QUEUES, RUNNING, WAITING = 1000, 8, 10, 4000, 200


def build_instance(seed: int = 0) -> dict:
    """A cluster about 93% full; five queues borrow, five come back for their share."""
    rng = random.Random(seed)
    nodes = [{"name": f"node-{i:04d}", "gpus": GPUS} for i in range(NODES)]
    queues = [{"name": f"team-{q}", "deserved": NODES * GPUS // QUEUES} for q in range(QUEUES)]
    free = [GPUS] * NODES
    jobs, order = [], list(range(NODES))
    for i in range(RUNNING):
        gpus = rng.choices([1, 2, 4], weights=[45, 40, 15])[0]
        rng.shuffle(order) if i % 500 == 0 else None
        node = next((n for n in order if free[n] >= gpus), None)
        if node is None:
            gpus = 1
            node = next(n for n in order if free[n] >= 1)
        free[node] -= gpus
        queue = rng.randrange(5) if rng.random() < 0.7 else 5 + rng.randrange(5)
        jobs.append({"name": f"run-{i}", "queue": f"team-{queue}", "gpus": gpus, "running": [nodes[node]["name"]],
                     "priority": rng.choice([10, 50, 50, 50, 100]), "submitted_at": i,
                     "checkpoint_age_s": rng.randrange(60, 3600)})
    for i in range(WAITING):
        queue = 5 + rng.randrange(5) if rng.random() < 0.8 else rng.randrange(5)
        jobs.append({"name": f"wait-{i}", "queue": f"team-{queue}", "gpus": rng.choice([1, 2, 4, 8]),
                     "submitted_at": RUNNING + i})
    return {"nodes": nodes, "queues": queues, "jobs": jobs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--solvers", default="cbc,highs")
    parser.add_argument("--candidate-nodes", type=int, default=PlannerConfig.candidate_nodes_per_job)
    args = parser.parse_args()
    t0 = time.perf_counter()
    scenario = parse_scenario(build_instance(), "bench")
    print(f"instance: {NODES} nodes x {GPUS} GPUs, {QUEUES} queues, {RUNNING} running, {WAITING} waiting; "
          f"validated in {time.perf_counter() - t0:.2f} s; candidate nodes per job: {args.candidate_nodes}; "
          f"median of {args.runs}")
    print(f"{'solver':8} {'build s':>8} {'solve s':>8} {'total s':>8} {'vars':>6} {'cons':>6} "
          f"{'stages':>6} {'starts':>6} {'preempt':>7} {'status'}")
    for name in args.solvers.split(","):
        if name == "highs" and not pulp.HiGHS().available():
            print(f"{name:8} skipped: highspy is not installed")
            continue
        runs = []
        for _ in range(args.runs):
            began = time.perf_counter()
            result = plan(scenario, PlannerConfig(solver=name, time_limit_s=60,
                                                  candidate_nodes_per_job=args.candidate_nodes))
            runs.append((result.solver.build_seconds, result.solver.seconds, time.perf_counter() - began, result))
            print(".", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        build, solve, total = (statistics.median(r[i] for r in runs) for i in range(3))
        r = runs[-1][3]
        print(f"{name:8} {build:8.2f} {solve:8.2f} {total:8.2f} {r.solver.variables:6d} {r.solver.constraints:6d} "
              f"{len(r.solver.stages):>6} {r.summary['starts']:6d} {r.summary['preemptions']:7d} {r.solver.status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
