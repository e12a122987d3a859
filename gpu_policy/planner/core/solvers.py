"""The solvers that `gpu_policy.planner.core.solve` drives, one stage at a time.

HiGHS runs in-process: the model is handed over once and each stage only changes the
objective and adds one row. Each solve after the first is given a cutoff, the value the last
solution reaches (with a stage's slack: `_Highs._cutoff`), so HiGHS prunes what cannot beat
a plan already in hand, and skips its feasibility jump heuristic, which hunts for a first
solution; presolve runs at the root only, not again at HiGHS's restarts. Together they take
about 0.55 of HiGHS's time on the bench instances (docs/benchmarks.md).
It is not given the starting solution itself: in highspy 1.16, after `setSolution` a stage
that improved on it could report the better objective and hand back the starting values
(seen on victim-floor-per-job.yaml), and a start hides presolve's mistake below: with one,
HiGHS proves the start optimal in the model presolve wrongly emptied (random cluster 78's
moves stage), whereas with a cutoff, which is no answer to hand back, it still says
infeasible. A stage HiGHS calls infeasible is solved again without presolve and without the
cutoff: it cannot be infeasible, and HiGHS 1.16's
presolve once said so (tests/planner/data/highs-presolve-infeasible.yaml). A later stage
HiGHS still calls infeasible means an earlier optimum leaned on its integrality tolerance
(HiGHS did on tests/planner/data/highs-tolerance.yaml before its solves had a cutoff): CBC
then solves every stage again, and its plan is kept if it finishes in time. CBC runs as a process
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
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.program import Program

OPTIMAL, CUT_OFF, NOTHING = "Optimal", "feasible (time limit)", "Nothing to decide"
_banner_shown = False


class StageOutcome(NamedTuple):
    """What a driver's solve of one stage found: its status text, the objective's value and
    the gap (None where unknown), and whether the solver called the stage infeasible."""

    status: str
    value: float | None
    gap: float | None = None
    infeasible: bool = False


def slack(value: float) -> float:
    """The bound a stage's optimum `value` leaves for the next: HiGHS and CBC prove optima to
    about 1e-6, so a bound any tighter could cut off the solution that attains it."""
    return value + 1e-6 * max(1.0, abs(value))


def backend_name(cfg: PlannerConfig) -> str:
    return "HiGHS" if cfg.solver == "highs" and highs_available() else "PULP_CBC_CMD"


def highs_available() -> bool:
    """highspy installs with gpu-policy; where it cannot be had, plans fall back on CBC."""
    return pulp.HiGHS().available()


class _Highs:
    """HiGHS in-process, one model for every stage."""

    name = "HiGHS"
    bounds_first = True  # `_Run._at_floors`: a wrong guess costs a quick infeasible solve

    def __init__(self, m: Program, cfg: PlannerConfig):
        import highspy

        self.highspy = highspy
        self.m, self.clock = m, cfg.clock
        self.columns = m.prob.variables()
        self.index = {v.hash: i for i, v in enumerate(self.columns)}  # PuLP's id of a variable: no property
        for _, row in m.lazy:  # a variable only rows held back hold is a column too, so that they may come
            for v in row.keys():
                if v.hash not in self.index:
                    self.index[v.hash] = len(self.columns)
                    self.columns.append(v)
        self.h = _quiet_highs(highspy)
        for option, value in (("threads", cfg.threads), ("random_seed", 0), ("mip_rel_gap", cfg.gap_rel),
                              ("mip_root_presolve_only", True)):  # the module docstring says why
            self.h.setOptionValue(option, value)
        self._load()
        self.values: np.ndarray | None = None
        self.before: np.ndarray | None = None  # the solution before the last solve (`add_rows`)
        self.bounds: list[int] = []  # the rows `keep_at_most` added, in order

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
                    indices.append(self.index[v.hash])
                    values.append(a)
            low, up = c.getLb(), c.getUb()
            lows.append(-inf if low is None else low)
            ups.append(inf if up is None else up)
        if starts:
            self.h.addRows(len(starts), np.array(lows), np.array(ups), len(indices), np.array(starts, np.int32),
                           np.array(indices, np.int32), np.array(values, dtype=float))

    def _row(self, expr) -> tuple[np.ndarray, np.ndarray]:
        items = [(self.index[v.hash], a) for v, a in expr.items() if a and v.hash in self.index]
        return np.array([i for i, _ in items], np.int32), np.array([a for _, a in items], dtype=float)

    def solve(self, objective, seconds: float, retry: bool = True) -> StageOutcome:
        """`retry`: solve again without presolve where HiGHS calls the stage infeasible."""
        self.before = self.values
        costs = self.set_objective(objective)
        began = self.clock()
        self.h.setOptionValue("time_limit", float(seconds))
        cutoff = self._cutoff(costs, objective.constant)
        self.h.setOptionValue("objective_bound", cutoff)
        # feasibility jump hunts for a first solution: with a cutoff one is known to exist
        self.h.setOptionValue("mip_heuristic_run_feasibility_jump", cutoff == self.highspy.kHighsInf)
        self.h.run()
        if retry and self.h.getModelStatus() == self.highspy.HighsModelStatus.kInfeasible:
            # Keeping every running job is feasible, and each stage's bound keeps the last
            # solution feasible: "infeasible" is presolve's mistake (HiGHS 1.16 made it on
            # tests/planner/data/highs-presolve-infeasible.yaml). Solve again without it, and
            # without the cutoff.
            self.h.setOptionValue("time_limit", max(0.0, float(seconds) - (self.clock() - began)))
            self.h.setOptionValue("presolve", "off")
            self.h.setOptionValue("objective_bound", self.highspy.kHighsInf)
            self.h.setOptionValue("mip_heuristic_run_feasibility_jump", True)
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

    def set_objective(self, objective) -> np.ndarray:
        """Give HiGHS `objective`'s cost per column (its constant stays out); returns them."""
        n = len(self.columns)
        costs = np.zeros(n)
        idx, vals = self._row(objective)
        costs[idx] = vals
        self.h.changeColsCost(n, np.arange(n, dtype=np.int32), costs)
        return costs

    def _cutoff(self, costs: np.ndarray, constant: float) -> float:
        """What the solve must not exceed (`objective_bound`, in HiGHS's terms, which leave out
        the constant): the last solution's value with a stage's slack, so that solution and
        every one as good stay in; no cutoff before the first solution."""
        if self.values is None:
            return self.highspy.kHighsInf
        return slack(float(costs @ self.values) + constant) - constant

    def value(self, objective) -> float:
        """The objective at the last solution."""
        idx, vals = self._row(objective)
        return float(vals @ self.values[idx]) + objective.constant

    def keep_at_most(self, objective, bound: float) -> None:
        idx, vals = self._row(objective)
        self.bounds.append(self.h.getNumRow())
        self.h.addRow(-self.highspy.kHighsInf, bound - objective.constant, len(idx), idx, vals)

    def drop_rows(self, count: int) -> None:
        """Take back the last `count` bounds `keep_at_most` added (rows `add_rows` added
        after them stay)."""
        rows = np.array(self.bounds[-count:], dtype=np.int32)
        del self.bounds[-count:]
        self.h.deleteRows(count, rows)

    def add_rows(self, rows: list[tuple[str, pulp.LpConstraint]]) -> None:
        """Add the program's rows held back (`Program.lazy`), and forget the last solution,
        which breaks one of them: the next solve's cutoff is the solution's before it."""
        inf = self.highspy.kHighsInf
        for _, row in rows:
            idx, vals = self._row(row)
            low, up = row.getLb(), row.getUb()
            self.h.addRow(-inf if low is None else low, inf if up is None else up, len(idx), idx, vals)
        self.values = self.before

    def hold(self, variables, at_zero: bool) -> None:
        """Fix `variables` at 0 (`at_zero`), or give them their own bounds back."""
        for v in variables:
            high = self.highspy.kHighsInf if v.upBound is None else v.upBound
            self.h.changeColBounds(self.index[v.hash], v.lowBound or 0, 0 if at_zero else high)

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
    """CBC, bundled with PuLP: a process per stage, each starting from the last solution. It
    does not bound the leading stages at their floors first: a wrong guess costs a process,
    and PuLP 3 has no way but a deprecated one to take a row back."""

    name = "PULP_CBC_CMD"
    bounds_first = False

    def __init__(self, m: Program, cfg: PlannerConfig):
        self.m, self.cfg = m, cfg
        self.saved: dict | None = None
        self.before: dict | None = None  # the solution before the last solve (`add_rows`)
        self.bounds: dict[str, float] = {}  # upper bounds of held variables
        for v in m.prob.variables():
            v.varValue = m.initial.get(v)

    def solve(self, objective, seconds: float) -> StageOutcome:
        self.before = self.saved
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

    def value(self, objective) -> float:
        """The objective at the last solution."""
        return objective.constant + sum(a * (v.varValue or 0.0) for v, a in objective.items())

    def keep_at_most(self, objective, bound: float) -> None:
        self.m.prob += objective <= bound, f"stage{self.m.prob.numConstraints()}"

    def add_rows(self, rows: list[tuple[str, pulp.LpConstraint]]) -> None:
        """Add the program's rows held back (`Program.lazy`), and go back to the solution
        before the last, which breaks one of them (the next solve starts from it)."""
        for name, row in rows:
            self.m.prob += row, name
        self.saved = self.before
        self._restore()

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


def highs(m: Program, cfg: PlannerConfig) -> _Highs:
    """HiGHS in-process, one model for every stage of `m`."""
    return _Highs(m, cfg)


def cbc(m: Program, cfg: PlannerConfig) -> _Cbc:
    """CBC, a process per stage of `m`."""
    return _Cbc(m, cfg)
