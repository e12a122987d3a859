"""Plan quality: fairness shortfall, preemptions and starts, against a recorded baseline.

    .venv/bin/python bench/plan_quality.py                 # compare with bench/plan_quality_baseline.json
    .venv/bin/python bench/plan_quality.py --baseline REV  # compare with the planner at git revision REV, same run
    .venv/bin/python bench/plan_quality.py --record FILE   # write this planner's figures as a baseline
    .venv/bin/python bench/plan_quality.py --baseline REV --record FILE  # write REV's figures

Instances: bench/plan_scale.py's instance at 1,000 nodes, and the 40 seeded random clusters of
tests/test_stability.py. Per plan: what each queue holds after it, preemptions, moves, starts and
GPUs started; the comparison then judges both plans by the same shares (this package's
fair_shares): the guarantee shortfall (GPUs leaf queues lack to min(deserved, demand)), the
fair-share shortfall (GPUs they lack to their fair share). The verdict is lexicographic, in the
planner's order of objectives: guarantees, fair share, preemptions, then GPUs started.
These figures do not depend on how busy the machine is. The recorded baseline is the planner
before the rewrite (git revision 9ef7510).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.planner.core.fair_share import fair_shares, queue_demands

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.baseline import revision, run_at_commit  # noqa: E402
from bench.instances import scale_instance  # noqa: E402
from tests.planner.random_clusters import random_scenario  # noqa: E402

BASELINE = Path(__file__).with_name("plan_quality_baseline.json")
RANDOM_SEEDS = range(40)


def instances():
    yield "scale-1000", scale_instance(1000), 120.0
    for seed in RANDOM_SEEDS:
        yield f"random-{seed}", random_scenario(seed), 60.0


def figures(name: str, data: dict, time_limit: float) -> dict:
    s = parse_scenario(data, name)
    result = plan(s, PlannerConfig(time_limit_s=time_limit))
    counts = {a: sum(1 for j in result.jobs if j.action == a) for a in ("start", "preempt", "move")}
    jobs = {j.name: j for j in s.jobs}
    return {
        "instance": name,
        "allocated": {q.name: q.allocated_after for q in result.queues},
        "preemptions": counts["preempt"],
        "moves": counts["move"],
        "starts": counts["start"],
        "started_gpus": sum(jobs[j.name].total_gpus for j in result.jobs if j.action == "start"),
        "status": result.solver.status,
    }


def shortfalls(f: dict, data: dict) -> dict:
    """The figures with guarantee and fair-share shortfalls judged by this package's shares."""
    s = parse_scenario(data, f["instance"])
    fair, demand = fair_shares(s), queue_demands(s)
    leaves = [q for q in s.queues if not s.children(q.name)]
    after = f["allocated"]
    return {**f,
            "guarantee_shortfall": round(sum(max(0.0, min(q.deserved, demand[q.name].total) - after[q.name])
                                             for q in leaves), 6),
            "fair_shortfall": round(sum(max(0.0, fair[q.name] - after[q.name]) for q in leaves), 6)}


def key(f: dict) -> tuple:
    return (f["guarantee_shortfall"], f["fair_shortfall"], f["preemptions"], -f["started_gpus"])


def compare(old: list[dict], new: list[dict]) -> None:
    data = {name: d for name, d, _ in instances()}
    before = {f["instance"]: shortfalls(f, data[f["instance"]]) for f in old}
    new = [shortfalls(f, data[f["instance"]]) for f in new]
    print(f"{'instance':12} {'guarantee':>13} {'fair share':>13} {'preemptions':>13} {'starts':>11} "
          f"{'GPUs started':>13}  verdict")
    verdicts = {"better": 0, "equal": 0, "worse": 0}
    totals = {k: [0.0, 0.0] for k in ("guarantee_shortfall", "fair_shortfall", "preemptions", "starts",
                                      "started_gpus")}
    for f in new:
        b = before.get(f["instance"])
        if b is None:
            continue
        verdict = "equal" if key(f) == key(b) else "better" if key(f) < key(b) else "worse"
        verdicts[verdict] += 1
        if f["instance"].startswith("random"):
            for k in totals:
                totals[k][0] += b[k]
                totals[k][1] += f[k]
        cells = [f"{b[k]:g} -> {f[k]:g}" for k in totals]
        print(f"{f['instance']:12} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} {cells[3]:>11} {cells[4]:>13}  {verdict}")
    cells = [f"{a:g} -> {b:g}" for a, b in totals.values()]
    print(f"{'40 random':12} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} {cells[3]:>11} {cells[4]:>13}  (sums)")
    print(f"lexicographic (guarantees, fair share, preemptions, GPUs started): "
          f"{verdicts['better']} better, {verdicts['equal']} equal, {verdicts['worse']} worse")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="FILE", help="write this planner's figures to FILE")
    parser.add_argument("--baseline", metavar="REV", type=revision,
                        help="compare with the planner at this git revision")
    parser.add_argument("--json", action="store_true", help="print one JSON line per instance")
    args = parser.parse_args()
    if args.baseline and args.record:
        Path(args.record).write_text(json.dumps(run_at_commit(args.baseline, "plan_quality.py", []), indent=1) + "\n")
        return 0
    new = []
    for name, data, limit in instances():
        new.append(figures(name, data, limit))
        if args.json:
            print(json.dumps(new[-1]), flush=True)
        else:
            print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if args.record:
        Path(args.record).write_text(json.dumps(new, indent=1) + "\n")
        return 0
    if args.json:
        return 0
    old = run_at_commit(args.baseline, "plan_quality.py", []) if args.baseline else json.loads(BASELINE.read_text())
    compare(old, new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
