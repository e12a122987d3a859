"""Solve a program's stages in order, each keeping the optimum of the ones before, inside
one deadline, and never without an answer.

Every stage has a feasible solution to fall back on: the do-nothing plan (keep every
running job, start nothing) before the first, the previous stage's solution, which the
bound added for that stage keeps feasible, before each later one. Variables the program
holds back (`PlanProgram.held`, stage -> variables) are 0 in every stage before the one named,
which is how a remedy is kept for after others (docs/policy.md). A stage cut off by the
deadline keeps the best solution it found (or, with none, the one it fell back on), the
remaining stages are skipped, and the report says "feasible (time limit)" with the gap
where the solver knows it. A stage that ends with no solution while time is left (which
no correct solver does: every stage has a feasible solution) is handled the same way, and
the report says "feasible (a stage found no solution)".

HiGHS runs in-process: the model is handed over once and each stage only changes the
objective and adds one row. It is not given a starting solution: in highspy 1.16,
after `setSolution` a stage that improved on it could report the better objective and
hand back the starting values (seen on victim-floor-per-job.yaml). A stage HiGHS calls
infeasible is solved again without presolve: it cannot be infeasible, and HiGHS 1.16's
presolve once said so (tests/planner/data/highs-presolve-infeasible.yaml). A later stage
HiGHS still calls infeasible means an earlier optimum leaned on its integrality tolerance
(tests/planner/data/highs-tolerance.yaml): CBC then solves every stage again, and its plan
is kept if it finishes in time. CBC runs as a process
per stage, reading the model from a file PuLP writes, and starts from the last solution
through a MIP start.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import numpy as np
import pulp

from gpu_policy.errors import SolverError
from gpu_policy.plan import SolverReport
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.program import Program

OPTIMAL, CUT_OFF, NOTHING = "Optimal", "feasible (time limit)", "Nothing to decide"
NO_SOLUTION = "feasible (a stage found no solution)"
#: The status of a plan whose compositions change the GPUs its fair shares count and that no
#: plan made again with those GPUs could replace: `first_plan_kept(cause)`.
FIRST_PLAN_KEPT = "feasible ({cause}; fair shares of the GPUs attached now)"
_banner_shown = False


class StageOutcome(NamedTuple):
    """What a driver's solve of one stage found: its status text, the objective's value and
    the gap (None where unknown), and whether the solver called the stage infeasible."""

    status: str
    value: float | None
    gap: float | None = None
    infeasible: bool = False


def solve_stages(m: Program, cfg: PlannerConfig, deadline: float | None = None) -> SolverReport:
    """Solve `m.stages` in order before `deadline` (`cfg.clock` seconds; default
    `cfg.time_limit_s` from now) and leave the chosen solution in the variables."""
    began = cfg.clock()
    deadline = began + cfg.time_limit_s if deadline is None else deadline
    if not m.stages:
        return SolverReport(backend=_backend(cfg), status=NOTHING, seconds=0.0, variables=0, constraints=0)
    driver = _Highs(m, cfg) if cfg.solver == "highs" and highs_available() else _Cbc(m, cfg)
    report, solved_any, refused = _solve_in_order(m, cfg, driver, deadline)
    if refused and isinstance(driver, _Highs) and cfg.clock() < deadline:
        # A later stage is infeasible only if an earlier optimum leaned on HiGHS's integrality
        # tolerance (seen once in 2,799 plans of the teams simulation: CBC proves that optimum
        # unattainable). CBC solves every stage again; its plan is kept if it finishes in time.
        cbc = _Cbc(m, cfg)
        again, cbc_solved, _ = _solve_in_order(m, cfg, cbc, deadline)
        if again.status == OPTIMAL:
            again.backend = f"{cbc.name} (HiGHS called stage {refused} infeasible)"
            driver, report, solved_any = cbc, again, cbc_solved
    driver.finish(solved_any)
    report.seconds = cfg.clock() - began
    report.variables, report.constraints = driver.size()
    return report


def _solve_in_order(m: Program, cfg: PlannerConfig, driver, deadline: float) -> tuple[SolverReport, bool, str | None]:
    """Each stage in order with `driver`, each keeping the optimum of the ones before. Returns
    the report, whether any stage found a solution, and the stage the solver called infeasible
    although there was time (None if there was none)."""
    report = SolverReport(backend=driver.name, status=OPTIMAL, seconds=0.0, variables=0, constraints=0,
                          gap=cfg.gap_rel)
    solved_any, refused, skip = False, None, None  # skip: why the stages left are not solved
    held = [v for name, _ in m.stages for v in m.held.get(name, ())]
    driver.hold(held, True)
    for name, objective in m.stages:
        driver.hold(m.held.get(name, ()), False)
        left = deadline - cfg.clock()
        if skip is None and left <= 0.0:
            report.status, report.gap, skip = CUT_OFF, None, "skipped (time limit)"
        if skip is not None:
            report.stages.append({"name": name, "status": skip})
            continue
        t0 = cfg.clock()
        found = driver.solve(objective, left)
        stage = {"name": name, "status": found.status, "seconds": round(cfg.clock() - t0, 4)}
        if found.value is not None:
            stage["objective"] = round(found.value, 9)
        report.stages.append(stage)
        if found.value is None:  # no solution at all: keep the previous stage's (or the do-nothing plan)
            if cfg.clock() >= deadline:
                report.status, skip = CUT_OFF, "skipped (time limit)"
            else:
                report.status, skip = NO_SOLUTION, f"skipped ({name} found no solution)"
                if found.infeasible:
                    refused = name
            report.gap = None
            continue
        solved_any = True
        if found.status != OPTIMAL:
            report.status, report.gap, skip = CUT_OFF, found.gap, "skipped (time limit)"
            continue
        driver.keep_at_most(objective, found.value + 1e-6 * max(1.0, abs(found.value)))
    driver.hold(held, False)  # stages skipped by the deadline leave the model as it was built
    return report, solved_any, refused


def _backend(cfg: PlannerConfig) -> str:
    return "HiGHS" if cfg.solver == "highs" and highs_available() else "PULP_CBC_CMD"


def highs_available() -> bool:
    """highspy installs with gpu-policy; where it cannot be had, plans fall back on CBC."""
    return pulp.HiGHS().available()


class _Highs:
    """HiGHS in-process, one model for every stage."""

    name = "HiGHS"

    def __init__(self, m: Program, cfg: PlannerConfig):
        import highspy

        self.highspy = highspy
        self.m, self.clock = m, cfg.clock
        self.columns = m.prob.variables()
        self.index = {v.name: i for i, v in enumerate(self.columns)}
        self.h = _quiet_highs(highspy)
        for option, value in (("threads", cfg.threads), ("random_seed", 0), ("mip_rel_gap", cfg.gap_rel)):
            self.h.setOptionValue(option, value)
        self._load()
        self.values: np.ndarray | None = None

    def _load(self) -> None:
        inf = self.highspy.kHighsInf
        n = len(self.columns)
        lower = np.array([-inf if v.lowBound is None else v.lowBound for v in self.columns], dtype=float)
        upper = np.array([inf if v.upBound is None else v.upBound for v in self.columns], dtype=float)
        self.h.addCols(n, np.zeros(n), lower, upper, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
        integer = [i for i, v in enumerate(self.columns) if v.cat == pulp.LpInteger]
        if integer:
            self.h.changeColsIntegrality(len(integer), np.array(integer, np.int32),
                                         np.full(len(integer), self.highspy.HighsVarType.kInteger))
        starts, indices, values, lows, ups = [], [], [], [], []
        for c in self.m.prob.constraints():
            starts.append(len(indices))
            for v, a in c.items():
                if a:
                    indices.append(self.index[v.name])
                    values.append(a)
            low, up = c.getLb(), c.getUb()
            lows.append(-inf if low is None else low)
            ups.append(inf if up is None else up)
        if starts:
            self.h.addRows(len(starts), np.array(lows), np.array(ups), len(indices), np.array(starts, np.int32),
                           np.array(indices, np.int32), np.array(values, dtype=float))

    def _row(self, expr) -> tuple[np.ndarray, np.ndarray]:
        items = [(self.index[v.name], a) for v, a in expr.items() if a and v.name in self.index]
        return np.array([i for i, _ in items], np.int32), np.array([a for _, a in items], dtype=float)

    def solve(self, objective, seconds: float) -> StageOutcome:
        n = len(self.columns)
        costs = np.zeros(n)
        idx, vals = self._row(objective)
        costs[idx] = vals
        self.h.changeColsCost(n, np.arange(n, dtype=np.int32), costs)
        began = self.clock()
        self.h.setOptionValue("time_limit", float(seconds))
        self.h.run()
        if self.h.getModelStatus() == self.highspy.HighsModelStatus.kInfeasible:
            # Keeping every running job is feasible, and each stage's bound keeps the last
            # solution feasible: "infeasible" is presolve's mistake (HiGHS 1.16 made it on
            # tests/planner/data/highs-presolve-infeasible.yaml). Solve again without it.
            self.h.setOptionValue("time_limit", max(0.0, float(seconds) - (self.clock() - began)))
            self.h.setOptionValue("presolve", "off")
            self.h.run()
            self.h.setOptionValue("presolve", "choose")
        model_status = self.h.getModelStatus()
        info = self.h.getInfo()
        if info.primal_solution_status != 2:  # no feasible solution
            return StageOutcome(f"no solution ({self.h.modelStatusToString(model_status)})", None,
                                infeasible=model_status == self.highspy.HighsModelStatus.kInfeasible)
        self.values = np.array(self.h.getSolution().col_value)
        value = float(costs @ self.values) + objective.constant
        if model_status == self.highspy.HighsModelStatus.kOptimal:
            return StageOutcome(OPTIMAL, value)
        return StageOutcome(CUT_OFF, value, info.mip_gap if np.isfinite(info.mip_gap) else None)

    def keep_at_most(self, objective, bound: float) -> None:
        idx, vals = self._row(objective)
        self.h.addRow(-self.highspy.kHighsInf, bound - objective.constant, len(idx), idx, vals)

    def hold(self, variables, at_zero: bool) -> None:
        """Fix `variables` at 0 (`at_zero`), or give them their own bounds back."""
        for v in variables:
            high = self.highspy.kHighsInf if v.upBound is None else v.upBound
            self.h.changeColBounds(self.index[v.name], v.lowBound or 0, 0 if at_zero else high)

    def finish(self, solved: bool) -> None:
        for i, v in enumerate(self.columns):
            v.varValue = float(self.values[i]) if solved else self.m.initial.get(v)

    def size(self) -> tuple[int, int]:
        return self.h.getNumCol(), self.h.getNumRow()


def _quiet_highs(highspy):
    """A Highs instance; the first in a process prints a banner on standard output, which
    would corrupt `--format json`, so that one is made with standard output muted."""
    global _banner_shown
    if _banner_shown:
        h = highspy.Highs()
    else:
        sys.stdout.flush()
        saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        try:
            h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
        _banner_shown = True
    h.setOptionValue("output_flag", False)
    return h


class _Cbc:
    """CBC, bundled with PuLP: a process per stage, each starting from the last solution."""

    name = "PULP_CBC_CMD"

    def __init__(self, m: Program, cfg: PlannerConfig):
        self.m, self.cfg = m, cfg
        self.saved: dict | None = None
        self.bounds: dict[str, float] = {}  # upper bounds of held variables
        for v in m.prob.variables():
            v.varValue = m.initial.get(v)

    def solve(self, objective, seconds: float) -> StageOutcome:
        self.m.prob.setObjective(objective)
        # CBC's `-threads 1` switches on its threaded code, which here hung for the whole time
        # limit in about 1 solve in 100 under load; without the option CBC runs serially.
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=seconds, gapRel=self.cfg.gap_rel,
                                   threads=None if self.cfg.threads == 1 else self.cfg.threads, warmStart=True,
                                   options=["randomSeed 1", "randomCbcSeed 1"])
        try:
            self.m.prob.solve(solver)
        except pulp.PulpSolverError as e:
            raise SolverError(f"the solver failed: {e}") from e
        status = self.m.prob.sol_status
        if status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) or any(
                v.varValue is None for v in self.m.prob.variables()):
            self._restore()
            return StageOutcome("no solution", None, infeasible=status == pulp.LpSolutionInfeasible)
        self.saved = {v: v.varValue for v in self.m.prob.variables()}
        return StageOutcome(OPTIMAL if status == pulp.LpSolutionOptimal else CUT_OFF, pulp.value(objective))

    def _restore(self) -> None:
        for v in self.m.prob.variables():
            v.varValue = self.saved.get(v) if self.saved is not None else self.m.initial.get(v)

    def keep_at_most(self, objective, bound: float) -> None:
        self.m.prob += objective <= bound, f"stage{self.m.prob.numConstraints()}"

    def hold(self, variables, at_zero: bool) -> None:
        """Fix `variables` at 0 (`at_zero`), or give them their own bounds back."""
        for v in variables:
            if at_zero:
                self.bounds[v.name] = v.upBound
                v.upBound = 0
            elif v.name in self.bounds:
                v.upBound = self.bounds.pop(v.name)

    def finish(self, solved: bool) -> None:
        self._restore()

    def size(self) -> tuple[int, int]:
        return self.m.prob.numVariables(), self.m.prob.numConstraints()
