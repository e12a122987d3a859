"""The planner's regression set: every plan's decisions, as digests, compared with another revision's.

    .venv/bin/python bench/same_plans.py --baseline REV        # plan the set here and at REV, list what differs
    .venv/bin/python bench/same_plans.py --record FILE         # write this checkout's digests
    .venv/bin/python bench/same_plans.py --against FILE        # compare with digests written before

The set: every scenario file the tests and examples hold (tests/scenarios, tests/planner/data,
gpu_policy/examples, and ../shared/scenarios where it exists), the bench instance at 500,
1,000, 2,000 and 5,000 nodes (bench/instances.py), and 150 seeded random clusters with every
feature the rules know (tests/planner/random_clusters.rich_scenario). A plan's digest covers
each job's action, replicas (nodes and GPU indices), code and reason, each queue's figures,
the summary and the compositions: everything but the solver's report and timings. A refactor
that claims "no plan changed" shows it here. Plans get a generous time limit (120 s), so a
busy machine cuts none of them short.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.baseline import revision, run_at_commit  # noqa: E402
from bench.instances import scale_instance  # noqa: E402
from tests.planner.random_clusters import rich_scenario  # noqa: E402

SCENARIO_DIRS = ("tests/scenarios", "tests/planner/data", "gpu_policy/examples")
SHARED = ROOT.parent / "shared" / "scenarios"
SIZES = (500, 1000, 2000, 5000)
RANDOM_SEEDS = range(150)


def instances():
    """(name, load) for every plan of the set; `load()` gives the Scenario."""
    from gpu_policy import load_scenario, parse_scenario

    files = sorted(p for d in SCENARIO_DIRS for p in (ROOT / d).glob("*.yaml"))
    if SHARED.is_dir():
        files += sorted(SHARED.glob("*.yaml"))
    for path in files:
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else f"shared/scenarios/{path.name}"
        yield name, lambda p=path: load_scenario(p)
    for nodes in SIZES:
        yield f"bench-{nodes}", lambda n=nodes: parse_scenario(scale_instance(n), f"bench-{n}")
    for seed in RANDOM_SEEDS:
        yield f"rich-{seed}", lambda s=seed: parse_scenario(rich_scenario(s), f"rich-{s}")


def digest(plan) -> str:
    """The plan's decisions as one hash: jobs, queues, summary and compositions."""
    data = plan.to_dict(with_timing=False)
    kept = {k: data.get(k) for k in ("jobs", "queues", "summary", "compositions")}
    # an optional field a revision added, left empty, is no change of decision
    kept["jobs"] = [{k: v for k, v in job.items() if v is not None} for job in kept["jobs"]]
    kept["queues"] = [{k: v for k, v in q.items() if v is not None} for q in kept["queues"]]
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def digests() -> dict[str, str]:
    from gpu_policy import PlannerConfig, plan

    config = PlannerConfig(time_limit_s=120.0)
    out = {}
    for name, load in instances():
        try:
            out[name] = digest(plan(load(), config))
        except Exception as e:  # noqa: BLE001  (a file the revision cannot read is a difference, not a stop)
            out[name] = f"error: {type(e).__name__}: {e}"[:200]
    return out


def compare(new: dict[str, str], old: dict[str, str]) -> int:
    """Print the plans that differ (or are only on one side); the number that do."""
    names = sorted(new.keys() | old.keys())
    differ = [n for n in names if new.get(n) != old.get(n)]
    for n in differ:
        print(f"differs: {n}: {old.get(n, '(absent)')} -> {new.get(n, '(absent)')}")
    print(f"{len(names)} plans, {len(differ)} differ")
    return len(differ)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=revision, help="compare with the planner at this git revision")
    parser.add_argument("--record", type=Path, help="write this checkout's digests to FILE")
    parser.add_argument("--against", type=Path, help="compare with digests recorded in FILE")
    parser.add_argument("--json", action="store_true", help="print the digests as one JSON line")
    args = parser.parse_args(argv)
    if args.against is not None and not args.against.is_file():
        parser.error(f"--against: no file {args.against}")
    new = digests()
    if args.json:
        print(json.dumps(new))
        return 0
    if args.record:
        args.record.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(new)} digests to {args.record}")
    old = None
    if args.baseline:
        old = run_at_commit(args.baseline, "same_plans.py", [])[0]
    elif args.against:
        old = json.loads(args.against.read_text())
    return 1 if old is not None and compare(new, old) else 0


if __name__ == "__main__":
    sys.exit(main())
