"""Scale benchmark of the planner: N nodes x 8 GPUs, 10 queues, 4 running and 0.2 waiting
jobs per node, about 93% full (bench/instances.py; 1,000 nodes is the instance of every
earlier figure in docs/benchmarks.md).

    .venv/bin/python bench/plan_scale.py [--nodes 1000] [--runs 5] [--solvers highs,cbc]
    .venv/bin/python bench/plan_scale.py --sweep 250,500,1000,2000,5000 [--plot docs/img/plan-scale.png]
    .venv/bin/python bench/plan_scale.py --baseline REV   # also the planner at git revision REV, same run
    .venv/bin/python bench/plan_scale.py --sweep 500,1000,2000,5000 --solvers highs --baseline d285a93 \
        --baseline-max-nodes 5000   # issue 26: old and new, growth exponents, same decisions
    .venv/bin/python bench/plan_scale.py --nodes 5000 --budgets 0.25,0.5,1,2   # how well plans keep a budget
    .venv/bin/python bench/plan_scale.py --nodes 5000 --solvers highs --topology --runs 5   # issue 39
    .venv/bin/python bench/plan_scale.py --sweep 1000,5000 --gangs --solvers highs --baseline REV --turns 3 \
        --runs 1   # the topology instance with gangs waiting, its topology taken off: old and new
    .venv/bin/python bench/plan_scale.py --sweep 500,1000,2000,5000 --solvers highs --baseline d285a93 \
        --turns 5 --runs 3   # old and new taking turns, one process each: ratios that hold still

Prints, per size and solver, the median of `--runs` plans (the sizes planned in turns, one
plan of each per round): model build (everything before the solver), solve, total and CPU
seconds (CPU time is what to compare on a busy machine), the program's size, and what the
plan decided (counts, and a digest of every job's decision, to tell whether two planners
decided the same). Garbage collection is tuned as the CLI and the controller tune it
(`gpu_policy.planner.gc_tuning`; `--default-gc` keeps CPython's settings). A sweep also
prints the growth exponent fitted between 500 and 5,000 nodes (log-log least squares on the
medians). With `--baseline`, the old planner's medians and the ratios new/old (taken in the
same run, so comparable on a busy machine) follow, for sizes up to `--baseline-max-nodes`.
With `--turns K` as well, new and old run K times each, taking turns, one process per turn,
every size in each (`--baseline-max-nodes` does not apply), and the ratios are per turn
(`in_turns`). With `--budgets`, each plan gets that time limit (for the whole plan) and the
table shows how long plans took against it, and how they ended.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import time
from pathlib import Path

import pulp

from gpu_policy import PlannerConfig, parse_scenario, plan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.baseline import revision, run_at_commit, run_here  # noqa: E402
from bench.instances import gangs_instance, scale_instance, without_topology  # noqa: E402

try:  # as the CLI and the controller run it; a baseline from before issue 26 has no GC tuning
    from gpu_policy.planner.gc_tuning import tune_gc
except ImportError:  # pragma: no cover - only under --baseline
    tune_gc = None


def measure(sizes: list[int], solver: str, runs: int, time_limit: float, gangs: bool = False) -> list[dict]:
    """Each size planned `runs` times, the sizes in turns (every round plans each size once),
    so that a change in the machine's speed during the sweep touches every size alike: the
    growth exponent compares sizes, and this machine's speed moves by half within minutes.
    One plan of the smallest size first, unmeasured, loads what a first plan loads."""
    scenarios = {n: parse_scenario(gangs_instance(n) if gangs else scale_instance(n), f"scale-{n}") for n in sizes}
    config = PlannerConfig(solver=solver, time_limit_s=time_limit)
    plan(scenarios[min(sizes)], config)
    samples: dict[int, list[tuple]] = {n: [] for n in sizes}
    results = {}
    for _ in range(runs):
        for n in sizes:
            began, cpu = time.perf_counter(), time.process_time()
            results[n] = result = plan(scenarios[n], config)
            samples[n].append((result.solver.build_seconds, result.solver.seconds, time.perf_counter() - began,
                               time.process_time() - cpu))
            print(".", end="", file=sys.stderr, flush=True)
    return [_row(n, scenarios[n], solver, samples[n], results[n]) for n in sizes]


def _row(nodes: int, scenario, solver: str, samples: list[tuple], result) -> dict:
    """One size's medians (build, solve, total and CPU seconds), its plans' wall seconds
    (`totals`), and what the last plan decided."""
    build, solve, total, cpu = (statistics.median(s[i] for s in samples) for i in range(4))
    return {"nodes": nodes, "jobs": len(scenario.jobs), "solver": solver, "build": build, "solve": solve,
            "total": total, "cpu": cpu, "totals": [s[2] for s in samples], "variables": result.solver.variables,
            "constraints": result.solver.constraints, "stages": len(result.solver.stages),
            "starts": result.summary["starts"], "preemptions": result.summary["preemptions"],
            "moves": result.summary["moves"], "status": result.solver.status, "decisions": decisions(result)}


def decisions(result) -> str:
    """A digest of what the plan decided, job by job (action and GPUs), to compare two planners."""
    lines = sorted(f"{j.name} {j.action} {[(p.node, p.gpu_indices) for p in j.replicas]}" for j in result.jobs)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def budgets(nodes: int, limits: list[float], runs: int, solver: str) -> None:
    scenario = parse_scenario(scale_instance(nodes), f"scale-{nodes}")
    print(f"{nodes} nodes, {solver}: seconds per plan against its time limit ({runs} plans each)")
    print(f"{'budget s':>9} {'median s':>9} {'max s':>7} {'over by':>8}  statuses (starts, preemptions)")
    for limit in limits:
        seconds, ends = [], []
        for _ in range(runs):
            began = time.perf_counter()
            result = plan(scenario, PlannerConfig(solver=solver, time_limit_s=limit))
            seconds.append(time.perf_counter() - began)
            ends.append(f"{result.solver.status} ({result.summary['starts']}, {result.summary['preemptions']})")
            print(".", end="", file=sys.stderr, flush=True)
        over = max(seconds) - limit
        print(f"{limit:9.2f} {statistics.median(seconds):9.3f} {max(seconds):7.3f} {max(over, 0):8.3f}  "
              f"{'; '.join(sorted(set(ends)))}")


def topology_cost(sizes: list[int], solver: str, runs: int, time_limit: float, gangs: bool) -> None:
    """`--topology`: each size's instance with blocks and racks and 5% of its jobs requiring a
    rack (`bench/instances.py`; with `gangs`, the waiting ones gangs of 2 or 4), and the same
    instance without topology, planned in turns in this process (`runs` plans of each): the
    medians, and the ratio with / without."""
    config = PlannerConfig(solver=solver, time_limit_s=time_limit)
    print(f"{solver}: the same instance with and without topology, {runs} plans each, in turns")
    print(f"{'nodes':>6} {'jobs':>6} {'rack jobs':>9} {'with s':>8} {'without s':>9} {'ratio':>6} "
          f"{'vars with':>9} {'vars w/o':>8}  starts with / without   status")
    for nodes in sizes:
        raw = scale_instance(nodes, topology=True, gangs=gangs)
        pair = {"with": parse_scenario(raw, f"scale-{nodes}-topology"),
                "without": parse_scenario(without_topology(raw), f"scale-{nodes}")}
        plan(pair["without"], config)  # what a first plan loads, unmeasured
        seconds: dict[str, list[float]] = {"with": [], "without": []}
        results = {}
        for _ in range(runs):
            for label, scenario in pair.items():
                began = time.perf_counter()
                results[label] = plan(scenario, config)
                seconds[label].append(time.perf_counter() - began)
                print(".", end="", file=sys.stderr, flush=True)
        with_s, without_s = statistics.median(seconds["with"]), statistics.median(seconds["without"])
        asking = sum(1 for j in raw["jobs"] if "topology" in j)
        w, o = results["with"], results["without"]
        print(f"\n{nodes:6d} {len(raw['jobs']):6d} {asking:9d} {with_s:8.3f} {without_s:9.3f} {with_s / without_s:6.2f} "
              f"{w.solver.variables:9d} {o.solver.variables:8d}  {w.summary['starts']:>6} / {o.summary['starts']:<6}"
              f"        {w.solver.status}")


def growth_exponent(rows: list[dict], low: int = 500, high: int = 5000) -> float | None:
    points = [(math.log(r["nodes"]), math.log(r["total"])) for r in rows if low <= r["nodes"] <= high]
    if len(points) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def print_rows(title: str, rows: list[dict]) -> None:
    print(title)
    print(f"{'nodes':>6} {'jobs':>6} {'solver':7} {'build s':>8} {'solve s':>8} {'total s':>8} {'cpu s':>7} "
          f"{'vars':>6} {'cons':>6} {'stages':>6} {'starts':>6} {'preempt':>7} {'moves':>5}  decisions     status")
    for r in rows:
        print(f"{r['nodes']:6d} {r['jobs']:6d} {r['solver']:7} {r['build']:8.3f} {r['solve']:8.3f} {r['total']:8.3f} "
              f"{r['cpu']:7.3f} {r['variables']:6d} {r['constraints']:6d} {r['stages']:6d} {r['starts']:6d} "
              f"{r['preemptions']:7d} {r['moves']:5d}  {r['decisions']}  {r['status']}")


def plot(rows: list[dict], old: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, data in (("this planner", rows), ("previous planner", old)):
        for solver in sorted({r["solver"] for r in data}):
            mine = sorted((r["nodes"], r["total"]) for r in data if r["solver"] == solver)
            if mine:
                ax.plot(*zip(*mine), marker="o", label=f"{label} ({solver})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted({r["nodes"] for r in rows})
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("nodes (8 GPUs each; 4.2 jobs per node)")
    ax.set_ylabel("seconds per plan (median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def in_turns(args, sizes: list[int], solvers: list[str]) -> tuple[list[dict], list[dict]]:
    """`--turns K`: this checkout and the baseline, one process each, taking turns K times,
    every process planning each size `--runs` times. A ratio new / old per turn compares two
    processes that ran a minute apart at most, which holds still where medians taken minutes
    apart do not (this machine's speed moves by half within minutes); the table shows the
    median over all turns. Returns those medians, new and old (for `--plot`)."""
    sweep = ["--sweep", ",".join(map(str, sizes)), "--runs", str(args.runs), "--solvers", ",".join(solvers),
             "--time-limit", str(args.time_limit)] + (["--default-gc"] if args.default_gc else []) + \
        (["--gangs"] if args.gangs else [])
    new: list[list[dict]] = []
    old: list[list[dict]] = []
    for turn in range(args.turns):
        new.append(run_here("plan_scale.py", sweep))
        old.append(run_at_commit(args.baseline, "plan_scale.py", sweep))
        print(f"turn {turn + 1} of {args.turns}", file=sys.stderr, flush=True)
    title = f"median of {args.turns} turns x {args.runs} plans, one process per turn"
    pooled = _pooled(new), _pooled(old)
    for label, rows in zip(("this checkout", f"baseline {args.baseline}"), pooled):
        print_rows(f"{label}, {title}", rows)
        for solver in solvers:
            exponent = growth_exponent([r for r in rows if r["solver"] == solver])
            if exponent is not None:
                print(f"growth exponent of the total, 500-5,000 nodes ({solver}): {exponent:.2f}")
    print("ratio new / old of the total seconds, turn by turn, and whether every job's decision is the same:")
    for i, r in enumerate(new[0]):
        ratios = [n[i]["total"] / o[i]["total"] for n, o in zip(new, old)]
        same = "same decisions" if all(n[i]["decisions"] == o[i]["decisions"] for n, o in zip(new, old)) \
            else "DIFFERENT decisions"
        print(f"  {r['nodes']:6d} nodes {r['solver']:6} {' '.join(f'{x:.3f}' for x in ratios)}  "
              f"median {statistics.median(ratios):.3f}  {same}")
    return pooled


def _pooled(turns: list[list[dict]]) -> list[dict]:
    """Per size and solver, the median over every turn's plans (total seconds) and over
    the turns' medians (build, solve and CPU seconds)."""
    rows = []
    for i, last in enumerate(turns[-1]):
        mine = [t[i] for t in turns]
        rows.append({**last, "total": statistics.median(x for r in mine for x in r["totals"]),
                     **{k: statistics.median(r[k] for r in mine) for k in ("build", "solve", "cpu")}})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--sweep", help="comma-separated node counts, e.g. 250,500,1000,2000,5000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--solvers", default="highs,cbc")
    parser.add_argument("--time-limit", type=float, default=60.0, help="the plan's time budget (default 60 s)")
    parser.add_argument("--baseline", metavar="REV", type=revision, help="also run the planner at this git revision")
    parser.add_argument("--baseline-max-nodes", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=0, metavar="K",
                        help="with --baseline: K turns of new and old, one process each, taking turns")
    parser.add_argument("--plot", metavar="PNG", help="write the curve (log-log) to this file")
    parser.add_argument("--json", action="store_true", help="print one JSON line per measurement")
    parser.add_argument("--budgets", help="comma-separated time limits to measure on --nodes")
    parser.add_argument("--topology", action="store_true",
                        help="the instance with blocks, racks and 5%% of jobs requiring a rack, against itself without")
    parser.add_argument("--gangs", action="store_true", help="the waiting jobs that require a rack in the topology "
                        "instance are gangs of 2 or 4; without --topology, that instance with its topology taken off")
    parser.add_argument("--default-gc", action="store_true",
                        help="keep CPython's garbage collection settings (default: tuned as the CLI tunes them)")
    args = parser.parse_args()
    if args.turns and not args.baseline:
        parser.error("--turns needs --baseline")
    if args.turns and (args.json or args.budgets):
        parser.error("--turns prints its own tables: not with --json or --budgets")
    gc_tuned = tune_gc is not None and not args.default_gc
    if gc_tuned:
        tune_gc()
    if args.budgets:
        budgets(args.nodes, [float(x) for x in args.budgets.split(",")], args.runs, args.solvers.split(",")[0])
        return 0
    sizes = [int(x) for x in args.sweep.split(",")] if args.sweep else [args.nodes]
    solvers = [s for s in args.solvers.split(",") if s != "highs" or pulp.HiGHS().available()]
    if args.topology:
        topology_cost(sizes, solvers[0], args.runs, args.time_limit, args.gangs)
        return 0
    if args.turns:
        rows, old = in_turns(args, sizes, solvers)
        if args.plot:
            plot(rows, old, args.plot)
        return 0
    rows = []
    for solver in solvers:
        rows += measure(sizes, solver, args.runs, args.time_limit, args.gangs)
    print(file=sys.stderr)
    if args.json:
        for row in rows:
            print(json.dumps(row), flush=True)
        return 0
    print_rows(f"median of {args.runs} plans, time budget {args.time_limit:g} s, "
               f"{'GC tuned' if gc_tuned else 'default GC'}", rows)
    exponent = growth_exponent([r for r in rows if r["solver"] == solvers[0]])
    if exponent is not None:
        print(f"growth exponent of the total, 500-5,000 nodes ({solvers[0]}): {exponent:.2f}")
    old = []
    if args.baseline:
        small = [str(n) for n in sizes if n <= args.baseline_max_nodes]
        if small:
            old = run_at_commit(args.baseline, "plan_scale.py",
                                ["--sweep", ",".join(small), "--runs", str(args.runs), "--solvers", ",".join(solvers),
                                 "--time-limit", str(args.time_limit)] + (["--default-gc"] if args.default_gc else [])
                                + (["--gangs"] if args.gangs else []))
            print_rows(f"baseline {args.baseline}, same run", old)
            exponent = growth_exponent([r for r in old if r["solver"] == solvers[0]])
            if exponent is not None:
                print(f"baseline growth exponent, 500-5,000 nodes ({solvers[0]}): {exponent:.2f}")
            print("ratio new / old (total seconds, CPU seconds), and whether every job's decision is the same:")
            for r in rows:
                o = next((o for o in old if o["nodes"] == r["nodes"] and o["solver"] == r["solver"]), None)
                if o:
                    same = "same decisions" if r["decisions"] == o.get("decisions") else "DIFFERENT decisions"
                    print(f"  {r['nodes']:6d} nodes {r['solver']:6} {r['total'] / o['total']:.3f} "
                          f"{r['cpu'] / o['cpu']:.3f}  {same}")
    if args.plot:
        plot(rows, old, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
