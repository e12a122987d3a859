"""HiGHS's time on each solve of a plan under several option sets, to choose what the planner
gives HiGHS (gpu_policy/planner/core/solvers.py).

    .venv/bin/python bench/solver_options.py [--nodes 1000,5000] [--runs 5]

Plans the scale instance (bench/instances.py) once per size and keeps every model HiGHS is
asked to solve (rows, bounds, integrality and the stage's objective, as an MPS file in a
temporary folder) with the value the solution before it reaches. Each kept model is then
solved afresh under each option set, the sets taking turns so that a busy machine slows
them alike. The table shows, per size, the median CPU seconds (`time.process_time`) of each
solve over `--runs` and their sum, and the script fails if two sets end a solve at optima
further apart than a stage's slack. The option sets:

- `defaults`: HiGHS's own (the planner before issue 26's solver round);
- `root presolve`: `mip_root_presolve_only` (no presolve again at HiGHS's restarts);
- `cutoff`: `objective_bound`, the value the solution before reaches with a stage's slack;
- `both`: the two above;
- `both, no jump`: and no feasibility jump heuristic where there is a cutoff (what the
  planner gives HiGHS now).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import highspy

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.planner.core import solvers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.instances import scale_instance  # noqa: E402

OPTION_SETS = {
    "defaults": lambda before: {},
    "root presolve": lambda before: {"mip_root_presolve_only": True},
    "cutoff": lambda before: _cutoff(before),
    "both": lambda before: {"mip_root_presolve_only": True, **_cutoff(before)},
    "both, no jump": lambda before: {"mip_root_presolve_only": True, **_cutoff(before, jump=False)},
}


def _cutoff(before: float | None, jump: bool = True) -> dict:
    """The cutoff from the solution before; `jump`: keep the feasibility jump heuristic with it."""
    if before is None:
        return {}
    return {"objective_bound": solvers.slack(before), **({} if jump else {"mip_heuristic_run_feasibility_jump": False})}


def kept_solves(nodes: int, folder: Path) -> list[tuple[Path, float | None]]:
    """Plan the `nodes`-node instance; each solve's model file and the value the solution
    before it reaches (in HiGHS's terms: no constant), None for the first."""
    kept: list[tuple[Path, float | None]] = []
    real = solvers._Highs.solve

    def keep(driver, objective, seconds, retry=True):
        costs = driver.set_objective(objective)
        path = folder / f"{nodes}-{len(kept)}.mps"
        driver.h.writeModel(str(path))
        kept.append((path, None if driver.values is None else float(costs @ driver.values)))
        return real(driver, objective, seconds, retry)

    solvers._Highs.solve = keep
    try:
        plan(parse_scenario(scale_instance(nodes), f"scale-{nodes}"), PlannerConfig())
    finally:
        solvers._Highs.solve = real
    return kept


def timed(path: Path, options: dict) -> tuple[float, float]:
    """CPU seconds and optimum of one solve of the model at `path` under `options`."""
    h = solvers._quiet_highs(highspy)  # the first Highs of a process prints a banner
    for name, value in {"threads": 1, "random_seed": 0, "mip_rel_gap": 0.0, **options}.items():
        h.setOptionValue(name, value)
    h.readModel(str(path))
    began = time.process_time()
    h.run()
    spent = time.process_time() - began
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise SystemExit(f"{path.name}: {h.modelStatusToString(h.getModelStatus())} under {options}")
    return spent, h.getInfo().objective_function_value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,5000", help="instance sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=5, help="solves of each model under each option set")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpu-policy-solves-") as tmp:
        print(f"{'nodes':>6} {'option set':<14} {'sum s':>7}  per solve (median of {args.runs})")
        for nodes in (int(n) for n in args.nodes.split(",")):
            kept = kept_solves(nodes, Path(tmp))
            seconds = {name: [[] for _ in kept] for name in OPTION_SETS}
            optima = {name: [0.0] * len(kept) for name in OPTION_SETS}
            for _ in range(args.runs):
                for k, (path, before) in enumerate(kept):
                    for name, options in OPTION_SETS.items():
                        spent, optima[name][k] = timed(path, options(before))
                        seconds[name][k].append(spent)
                    print(".", end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
            for name in OPTION_SETS:
                medians = [statistics.median(s) for s in seconds[name]]
                print(f"{nodes:>6} {name:<14} {sum(medians):7.3f}  " + " ".join(f"{m:.3f}" for m in medians))
            for k in range(len(kept)):
                values = [optima[name][k] for name in OPTION_SETS]
                if max(values) > solvers.slack(min(values)):
                    raise SystemExit(f"{nodes} nodes, solve {k}: the option sets end at different optima {values}")


if __name__ == "__main__":
    main()
