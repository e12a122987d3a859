"""CPU seconds per phase of one plan of the scale instance (bench/instances.py), to see where
the planner's Python work around the solver goes, and old against new in one run.

    .venv/bin/python bench/plan_phases.py [--nodes 5000] [--runs 5] [--baseline REV] [--gangs]

Each phase is a planner function, timed (`time.process_time`, so a busy machine inflates
it less than wall time) every time the plan calls it, summed over the plan; the table shows
the median over `--runs` plans, after one plan to warm up. Indented phases run inside the
one above them (their time is part of it). Garbage collection is tuned as the CLI tunes it.
With `--baseline`, the same script runs on the package at that git revision in the same
run (bench/baseline.py), and a ratio new / old follows; a phase the old package lacks
shows "-". With `--gangs`, the instance with gangs waiting (`bench/instances.gangs_instance`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from gpu_policy import PlannerConfig, parse_scenario, plan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.baseline import revision, run_at_commit  # noqa: E402
from bench.instances import gangs_instance, scale_instance  # noqa: E402

try:  # a baseline from before issue 26 has no GC tuning
    from gpu_policy.planner.gc_tuning import tune_gc
except ImportError:  # pragma: no cover - only under --baseline
    tune_gc = None

#: (label, modules, function or Class.method), in the order a plan runs them; labels with
#: leading spaces run inside the phase above. A phase names every module that has held it
#: (the first that imports serves), so that `--baseline` measures older revisions too.
PHASES = [
    ("running_layout", ("gpu_policy.model.layout", "gpu_policy.planner.layout"), "running_layout"),
    ("node kinds (composition)", ("gpu_policy.planner.ruleset",), "RuleSet.grow_kinds"),
    ("Composer.kinds", ("gpu_policy.planner.rules.composition",), "Composer.kinds"),  # before the rule set
    ("_standing (shares, start order)", ("gpu_policy.planner.planner",), "_standing"),
    ("  fair_share.queue_demands", ("gpu_policy.planner.core.fair_share", "gpu_policy.fair_share"), "queue_demands"),
    ("fits.never_fits (start order, reasons)", ("gpu_policy.planner.rules.fits",), "never_fits"),
    ("scope", ("gpu_policy.planner.core.scope", "gpu_policy.planner.scope"), "scope"),
    ("  Consolidations.__init__", ("gpu_policy.planner.core.consolidation", "gpu_policy.planner.consolidation"), "Consolidations.__init__"),
    ("build_decisions", ("gpu_policy.planner.core.program", "gpu_policy.planner.program"), "build_decisions"),
    ("  program._room_by_shape", ("gpu_policy.planner.core.program", "gpu_policy.planner.program"), "_room_by_shape"),
    ("scenario_mix", ("gpu_policy.planner.core.packing", "gpu_policy.planner.packing"), "scenario_mix"),
    ("accounting.accounts", ("gpu_policy.planner.accounting",), "accounts"),  # before issue 26's rules
    ("program rows and stages (rules)", ("gpu_policy.planner.core.rule", "gpu_policy.planner.rules.protocol"), "build"),
    ("  accounts", ("gpu_policy.planner.core.context", "gpu_policy.planner.rules.claims"), "accounts"),
    ("solve_stages", ("gpu_policy.planner.core.solve", "gpu_policy.planner.solve"), "solve_stages"),
    ("realize", ("gpu_policy.planner.core.realize", "gpu_policy.planner.realize"), "realize"),
    ("  packing.pack", ("gpu_policy.planner.core.packing", "gpu_policy.planner.packing"), "pack"),
    ("_plan (decisions, reasons)", ("gpu_policy.planner.planner",), "_plan"),  # before issue 26's writeup
    ("write_plan (decisions, reasons)", ("gpu_policy.planner.writeup",), "write_plan"),
    ("  FreeRoom.__init__", ("gpu_policy.planner.core.judged", "gpu_policy.planner.reasons"), "FreeRoom.__init__"),
]


def instrument(spent: dict[str, float], phases: list[tuple[str, tuple[str, ...], str]] = PHASES) -> list[str]:
    """Wrap each phase's function so that its CPU seconds add up in `spent`, wherever the
    package imported it by name; the labels of the phases this package has."""
    found = []
    for label, module_names, attr in phases:
        owner = _first_module(module_names)
        if owner is None:
            continue
        *classes, name = attr.split(".")
        for cls in classes:
            owner = getattr(owner, cls, None)
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            continue
        timed = _timed(original, label.strip(), spent)
        setattr(owner, name, timed)
        if not classes:  # also where other modules imported it: `from ... import name`
            for module in list(sys.modules.values()):
                if getattr(module, "__name__", "").startswith("gpu_policy") and \
                        getattr(module, name, None) is original:
                    setattr(module, name, timed)
        found.append(label)
    return found


def _first_module(names: tuple[str, ...]):
    """The first of the modules `names` that this package has (None: none)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _timed(fn, label: str, spent: dict[str, float]):
    def timed(*args, **kwargs):
        began = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - began
    return timed


def measure(nodes: int, runs: int, gangs: bool = False) -> dict[str, float]:
    """Median CPU seconds per phase, and of the whole plan ("total")."""
    spent: dict[str, float] = defaultdict(float)
    labels = instrument(spent)
    scenario = parse_scenario(gangs_instance(nodes) if gangs else scale_instance(nodes), f"scale-{nodes}")
    config = PlannerConfig(solver="highs", time_limit_s=60)
    plan(scenario, config)
    samples = []
    for _ in range(runs):
        spent.clear()
        began = time.process_time()
        plan(scenario, config)
        samples.append({**spent, "total": time.process_time() - began})
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return {key.strip(): statistics.median(s.get(key.strip(), 0.0) for s in samples)
            for key in [*labels, "total"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", metavar="REV", type=revision,
                        help="also time the planner at this git revision")
    parser.add_argument("--json", action="store_true", help="print the medians as one JSON line")
    parser.add_argument("--gangs", action="store_true", help="the instance with gangs waiting (bench/instances.py)")
    args = parser.parse_args()
    if tune_gc is not None:
        tune_gc()
    new = measure(args.nodes, args.runs, args.gangs)
    if args.json:
        print(json.dumps(new))
        return 0
    old = (run_at_commit(args.baseline, "plan_phases.py", ["--nodes", str(args.nodes), "--runs", str(args.runs)]
                         + (["--gangs"] if args.gangs else []))[0] if args.baseline else None)
    print(f"{args.nodes} nodes{' (gangs waiting)' if args.gangs else ''}, CPU seconds per plan (median of "
          f"{args.runs}), HiGHS")
    print(f"{'phase':38} {'new':>7}" + (f" {'old':>7} {'new/old':>8}" if old else ""))
    for label in [label for label, _, _ in PHASES] + ["total"]:
        key = label.strip()
        if key not in new and not (old and key in old):
            continue
        row = f"{label:38} {_cell(new.get(key))}"
        if old:
            ratio = f"{new[key] / old[key]:8.2f}" if key in new and old.get(key) else f"{'-':>8}"
            row += f" {_cell(old.get(key))} {ratio}"
        print(row)
    return 0


def _cell(seconds: float | None) -> str:
    return f"{seconds:7.3f}" if seconds is not None else f"{'-':>7}"


if __name__ == "__main__":
    sys.exit(main())
