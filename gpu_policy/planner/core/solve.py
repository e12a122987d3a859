"""Solve a program's stages in order, each keeping the optimum of the ones before, inside
one deadline, and never without an answer.

HiGHS's cost is per solve, not per variable, so stages are settled in as few solves as can be
proven to keep the order: before the first solve, the leading stages whose floor (`Floors`:
their lowest value over the variables' bounds and unit rows) is at least 0 are bounded at it
and the next stage solved, which proves them optimal if it finds a solution (else the bounds
are dropped: `_Run._at_floors`); a stage whose floor the solution before it already attains
is optimal without a solve; and stages are merged into one weighted solve where
`merged_stages` proves the weights keep the order. Each stage's entry in the report says how it was settled (`settled`).

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

import math
import os
import sys
from typing import NamedTuple

import numpy as np
import pulp

from gpu_policy.errors import SolverError
from gpu_policy.model.plan import SolverReport
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.linear import common_step
from gpu_policy.planner.core.program import Program

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
    """Each stage in order with `driver`, each keeping the optimum of the ones before, in as
    few solves as `merged_stages` and `Floors` prove enough. Returns the report, whether any
    solve found a solution, and the stage the solver called infeasible although there was
    time (None if there was none)."""
    report = SolverReport(backend=driver.name, status=OPTIMAL, seconds=0.0, variables=0, constraints=0,
                          gap=cfg.gap_rel)
    floors = Floors(m.prob, m.stages) if cfg.gap_rel == 0 else None  # a gap would apply to a merged sum: one at a time
    run = _Run(m, driver, floors)
    held = [v for name, _ in m.stages for v in m.held.get(name, ())]
    driver.hold(held, True)
    i = 0
    while i < len(m.stages) and run.why is None:
        if cfg.clock() >= deadline:
            report.status, report.gap, run.why = CUT_OFF, None, "skipped (time limit)"
            break
        i = run.step(i, deadline, cfg.clock)
        if run.why is not None:
            report.status, report.gap = run.stopped
    report.stages = run.entries()
    driver.hold(held, False)  # stages skipped by the deadline leave the model as it was built
    return report, run.solved_any, run.refused


class _Run:
    """One pass over a program's stages: the entry of each stage settled so far, and why the
    stages left are not solved (None while they are)."""

    def __init__(self, m: Program, driver, floors: Floors | None):
        self.m, self.driver, self.floors = m, driver, floors
        self.settled: list[dict | None] = [None] * len(m.stages)
        self.solved_any, self.refused = False, None
        self.why: str | None = None
        self.stopped: tuple[str, float | None] = (OPTIMAL, None)

    def step(self, i: int, deadline: float, clock) -> int:
        """Settle stage i, and the stages merged with it; returns the next stage to settle."""
        name, objective = self.m.stages[i]
        self.driver.hold(self.m.held.get(name, ()), False)
        if not self.solved_any and self.floors is not None and self.driver.bounds_first:
            after = self._at_floors(i, deadline, clock)
            if after is not None:
                return after
        if self.solved_any and self.floors is not None:
            value = self.driver.value(objective)
            if value <= _slack(self.floors.floor(i)):  # the solution before attains its floor
                self._keep(i, value, "floor met by the solution before it")
                return i + 1
        group = merged_stages(self.m.stages, self.m.held, self.floors, i)
        t0 = clock()
        found = self.driver.solve(group.objective(self.m.stages), deadline - clock())
        return self._settle(i, group, found, clock() - t0, clock() >= deadline)

    def _at_floors(self, i: int, deadline: float, clock) -> int | None:
        """Before any solve: bound the leading stages (i to k - 1: a floor of at least 0, no
        variables held until them) at their floors and solve stage k. A solution proves each
        of them optimal, since a floor is a lower bound: the rows are those solving them one
        by one would have added. Where the bounds leave no solution, the last is dropped and
        the stage it bounded is solved instead (a wrong guess costs a solve, which proving
        infeasibility keeps short); None where none is left to bound (the stages are then
        solved as usual). Stages whose floor is below 0 are not bounded: such a floor is the
        relaxation's (reclaim options shared by a node's victims) and seldom attained."""
        k = i
        while (k + 1 < len(self.m.stages) and 0 <= self.floors.floor(k) < math.inf
               and not self.m.held.get(self.m.stages[k + 1][0])):
            k += 1
        while k > i:
            for j in range(i, k):
                self.driver.keep_at_most(self.m.stages[j][1], _slack(self.floors.floor(j)))
            self.driver.hold(self.m.held.get(self.m.stages[k][0], ()), False)
            group = merged_stages(self.m.stages, self.m.held, self.floors, k)
            t0 = clock()
            found = self.driver.solve(group.objective(self.m.stages), deadline - clock(), retry=False)
            if found.value is not None:
                for j in range(i, k):  # their bounds are in already
                    self._entry(j, self.driver.value(self.m.stages[j][1]),
                                f"at its floor (proved by {self.m.stages[k][0]})")
                return self._settle(k, group, found, clock() - t0, clock() >= deadline)
            self.driver.drop_rows(k - i)
            if clock() >= deadline:
                self._unsolved(i, found, clock() - t0, True)
                return i + 1
            k -= 1
        return None

    def _settle(self, i: int, group: Group, found: StageOutcome, seconds: float, timed_out: bool) -> int:
        """Keep what the solve of stage i (with the stages merged into it) found."""
        name = self.m.stages[i][0]
        if found.value is None or found.status != OPTIMAL:
            self._unsolved(i, found, seconds, timed_out)
            return i + 1
        self.solved_any = True
        for j in range(i, group.stop):
            self._keep(j, self.driver.value(self.m.stages[j][1]), "solved" if j == i else f"merged into {name}",
                       seconds if j == i else None)
        return group.stop

    def _keep(self, j: int, value: float, how: str, seconds: float | None = None) -> None:
        """Stage j is settled at `value`: its entry, and its bound for the stages after it."""
        self._entry(j, value, how, seconds)
        self.driver.keep_at_most(self.m.stages[j][1], _slack(value))

    def _entry(self, j: int, value: float, how: str, seconds: float | None = None) -> None:
        """Stage j's entry in the report: settled at `value`, `how`."""
        entry = {"name": self.m.stages[j][0], "status": OPTIMAL, "settled": how}
        if seconds is not None:
            entry["seconds"] = round(seconds, 4)
        self.settled[j] = {**entry, "objective": round(value, 9)}

    def _unsolved(self, i: int, found: StageOutcome, seconds: float, timed_out: bool) -> None:
        """Stage i's solve was cut off or found nothing: keep what it found, skip the rest."""
        name, objective = self.m.stages[i]
        entry = {"name": name, "status": found.status, "seconds": round(seconds, 4)}
        if found.value is not None:
            self.solved_any = True
            entry["objective"] = round(self.driver.value(objective), 9)
            self.why, self.stopped = "skipped (time limit)", (CUT_OFF, found.gap)
        elif timed_out:
            self.why, self.stopped = "skipped (time limit)", (CUT_OFF, None)
        else:
            self.why, self.stopped = f"skipped ({name} found no solution)", (NO_SOLUTION, None)
            self.refused = name if found.infeasible else None
        self.settled[i] = entry

    def entries(self) -> list[dict]:
        """Every stage's entry; those not settled say why."""
        return [entry or {"name": name, "status": self.why} for (name, _), entry in zip(self.m.stages, self.settled)]


def _slack(value: float) -> float:
    """The bound a stage's optimum `value` leaves for the next: HiGHS and CBC prove optima to
    about 1e-6, so a bound any tighter could cut off the solution that attains it."""
    return value + 1e-6 * max(1.0, abs(value))


#: Largest weighted span (sum over a group's stages of weight x (highest - lowest value))
#: a merge may reach: HiGHS's tolerances (1e-6 on integrality and on the gap) then stay far
#: below the margin each weight keeps over the stages after it.
EXACT_SPAN = 1e6


class Group(NamedTuple):
    """Stages `start`..`stop - 1`, solved as one: minimise sum weights[k] x stage objective."""

    start: int
    stop: int
    weights: list[float]

    def objective(self, stages: list) -> pulp.LpAffineExpression:
        if self.stop == self.start + 1:
            return stages[self.start][1]
        terms: dict = {}
        constant = 0.0
        for w, (_, objective) in zip(self.weights, stages[self.start:self.stop]):
            for v, a in objective.items():
                terms[v] = terms.get(v, 0.0) + w * a
            constant += w * objective.constant
        return pulp.LpAffineExpression([(v, a) for v, a in terms.items() if a], constant)


def merged_stages(stages: list, held: dict, floors: Floors | None, start: int) -> Group:
    """The stages solved together from `start`: f_1..f_k (in strict order) solved as
    min F = sum w_i f_i over the points that keep every earlier bound, w_k = 1.

    Claim: if every f_i with i < k takes values on a lattice a_i + d_i Z at every integer
    point (integer variables only, coefficients multiples of d_i: `lattice_step`) and
    w_i d_i > sum_{j>i} w_j (hi_j - lo_j), where hi_j, lo_j bound f_j over the variables'
    bounds and unit rows (`Floors`), then a minimiser x of F is optimal for f_1, then for f_2
    given f_1's optimum, ..., then f_k: the strict order. Proof, by induction on i, with x
    optimal for f_1..f_{i-1} in order (S_{i-1}: the points that are; S_0: every point): a y
    in S_{i-1} with f_i(y) < f_i(x) has f_i(y) <= f_i(x) - d_i (lattice) and f_j(y) = f_j(x)
    for j < i, so F(y) - F(x) <= -w_i d_i + sum_{j>i} w_j (f_j(y) - f_j(x))
    <= -w_i d_i + sum_{j>i} w_j (hi_j - lo_j) < 0, against x minimising F. Last, for y in
    S_{k-1}: F(y) - F(x) = f_k(y) - f_k(x) >= 0. So the last stage of a group may be any.

    Weights are w_i = (2 sum_{j>i} w_j (hi_j - lo_j) + 1) / d_i (a margin of more than half
    a step); a group whose weighted span would pass `EXACT_SPAN` is not formed, so the
    solver's tolerances stay far below that margin. A stage whose variables are held until
    it (`Program.held`) starts a group: the stages before it see those variables at 0. With
    `floors` None (a relative gap, which would apply to the sum) every stage is alone.
    """
    best = Group(start, start + 1, [1.0])
    while floors is not None and best.stop < len(stages) and not held.get(stages[best.stop][0]):
        trial = _weights(stages, floors, start, best.stop + 1)
        if trial is None:  # a later stage only widens the span to outweigh
            break
        best = trial
    return best


def _weights(stages: list, floors: Floors, start: int, stop: int) -> Group | None:
    """Weights that prove the order of stages start..stop-1 (`merged_stages`), or None."""
    weights = [1.0]
    span = floors.span(stop - 1)  # sum_{j>i} w_j (hi_j - lo_j)
    for i in range(stop - 2, start - 1, -1):
        step = floors.step(i)
        if step is None or span > EXACT_SPAN:
            return None
        weights.insert(0, (2 * span + 1) / step)
        span += weights[0] * floors.span(i)
    return Group(start, stop, weights) if span <= EXACT_SPAN else None


def lattice_step(objective: pulp.LpAffineExpression) -> float | None:
    """d such that the objective changes by multiples of d between integer points: integer
    variables only, coefficients on a common denominator up to 1,000 (`common_step`); None
    if there is none."""
    if any(v.cat != pulp.LpInteger for v, a in objective.items() if a):
        return None
    return common_step(objective.values())


class Floors:
    """The lowest and highest value of each stage's objective (`floor(i)`, `span(i)`) over its
    variables' bounds, the program's unit rows (sum of variables <= b, every coefficient 1,
    every variable >= 0: keep + move <= 1, one option per node): a job's "preempted"
    (1 - keep - move) then has floor 0, not -1; and its cover rows (x <= sum of y, every
    variable >= 0: a gang's "preempted inside its queue" is at most its "preempted", the sum
    of its cuts), so a victim's cost counted for other queues, its cuts less its part inside,
    has floor 0 too. Each variable counts in one unit row at most (its longest) and one cover
    row, so the floor is that of a relaxation of the program: a true lower bound. Also each
    stage's `lattice_step` (`step`), for `merged_stages`."""

    def __init__(self, prob: pulp.LpProblem, stages: list):
        constraints = prob.constraints()
        rows = [row for row in map(_unit_row, constraints) if row is not None]
        self.row: dict = {}  # variable -> (row id, its b)
        for k, (variables, b) in sorted(enumerate(rows), key=lambda r: -len(r[1][0])):
            for v in variables:
                self.row.setdefault(v, (k, b))
        self.cover: dict = {}  # x -> the variables whose sum bounds it
        for x, ys in filter(None, map(_cover_row, constraints)):
            self.cover.setdefault(x, ys)
        self.stages, self.steps, self.lows, self.spans = stages, {}, {}, {}

    def step(self, i: int) -> float | None:
        """Stage i's `lattice_step`, found once."""
        if i not in self.steps:
            self.steps[i] = lattice_step(self.stages[i][1])
        return self.steps[i]

    def floor(self, i: int) -> float:
        """The lowest value of stage i's objective, found once."""
        if i not in self.lows:
            self.lows[i] = self.low(self.stages[i][1])
        return self.lows[i]

    def span(self, i: int) -> float:
        """Highest less lowest value of stage i's objective, found once."""
        if i not in self.spans:
            self.spans[i] = -self.low(-self.stages[i][1]) - self.floor(i)
        return self.spans[i]

    def low(self, objective) -> float:
        """A lower bound on the objective: each variable at its best bound, except that the
        variables of one unit row on which the objective falls share the row's b, and a
        variable x that the objective lowers by c, covered by y_1..y_n that it raises by at
        least c each, is paid for by them (c x <= c sum y_i)."""
        total = objective.constant
        falling: dict = {}  # unit row -> [(coefficient, variable)]
        for v, a in self._covered(objective).items():
            if a > 0:
                total += a * v.lowBound if v.lowBound is not None else -math.inf
            elif a < 0 and v in self.row:
                falling.setdefault(self.row[v], []).append((a, v))
            elif a < 0:
                total += a * v.upBound if v.upBound is not None else -math.inf
        for (_, b), terms in falling.items():
            room = b - sum(v.lowBound for _, v in terms)  # each at its lower bound, then the best raised
            for a, v in sorted(terms, key=lambda t: t[0]):
                raised = max(0.0, min(room, math.inf if v.upBound is None else v.upBound - v.lowBound))
                total += a * (v.lowBound + raised)
                room -= raised
        return total

    def _covered(self, objective) -> dict:
        """The objective's terms once each covered variable it lowers is paid for by those
        covering it (what a y pays comes off its coefficient, so no y pays twice): a x +
        sum b_i y_i with a < 0, x <= sum y_i and every b_i >= -a is at least 0 x + sum
        (b_i + a) y_i. A b_i short of -a by rounding alone (a victim's cost summed in
        another order) pays too, and keeps 0."""
        terms = dict(objective.items())
        for x, a in objective.items():
            ys = self.cover.get(x)
            if a < 0 and ys and all(terms.get(y, 0) >= -a * (1 - 1e-9) for y in ys):
                for y in ys:
                    terms[y] = max(0.0, terms[y] + a)
                terms[x] = 0
        return terms


def _cover_row(c: pulp.LpConstraint) -> tuple | None:
    """(x, [y_1..y_n]) if the row says x <= sum of y_i (sum y_i - x >= 0, or x - sum y_i <= 0;
    every coefficient 1 or -1, nothing else) over variables >= 0; else None."""
    if c.constant or any(v.lowBound is None or v.lowBound < 0 for v in c.keys()):
        return None
    sign = 1 if c.sense == pulp.LpConstraintGE else -1 if c.sense == pulp.LpConstraintLE else 0
    lowered = [v for v, a in c.items() if a == -sign]
    raised = [v for v, a in c.items() if a == sign]
    if not sign or len(lowered) != 1 or not raised or len(lowered) + len(raised) != len(c):
        return None
    return lowered[0], raised


def _unit_row(c: pulp.LpConstraint) -> tuple[list, float] | None:
    """(variables, b) if the row says sum of variables <= b (every coefficient 1, or every
    coefficient -1 in a row >= -b) over variables >= 0; else None."""
    signs = set(c.values())
    if len(signs) != 1 or any(v.lowBound is None or v.lowBound < 0 for v in c.keys()):
        return None
    sign = signs.pop()
    b = c.getUb() if sign == 1 else (-c.getLb() if sign == -1 and c.getLb() is not None else None)
    return (list(c.keys()), b) if b is not None else None


def _backend(cfg: PlannerConfig) -> str:
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
        self.h = _quiet_highs(highspy)
        for option, value in (("threads", cfg.threads), ("random_seed", 0), ("mip_rel_gap", cfg.gap_rel),
                              ("mip_root_presolve_only", True)):  # the module docstring says why
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
        return _slack(float(costs @ self.values) + constant) - constant

    def value(self, objective) -> float:
        """The objective at the last solution."""
        idx, vals = self._row(objective)
        return float(vals @ self.values[idx]) + objective.constant

    def keep_at_most(self, objective, bound: float) -> None:
        idx, vals = self._row(objective)
        self.h.addRow(-self.highspy.kHighsInf, bound - objective.constant, len(idx), idx, vals)

    def drop_rows(self, count: int) -> None:
        """Take back the last `count` bounds `keep_at_most` added."""
        rows = self.h.getNumRow()
        self.h.deleteRows(count, np.arange(rows - count, rows, dtype=np.int32))

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

    def value(self, objective) -> float:
        """The objective at the last solution."""
        return objective.constant + sum(a * (v.varValue or 0.0) for v, a in objective.items())

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
