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
The solvers themselves are `gpu_policy.planner.core.solvers`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pulp

from gpu_policy.model.plan import SolverReport
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.linear import common_step
from gpu_policy.planner.core.program import Program
from gpu_policy.planner.core.solvers import (CUT_OFF, NOTHING, OPTIMAL, StageOutcome, backend_name, cbc, highs,
                                             highs_available, slack)

NO_SOLUTION = "feasible (a stage found no solution)"
#: The status of a plan whose compositions change the GPUs its fair shares count and that no
#: plan made again with those GPUs could replace: `first_plan_kept(cause)`.
FIRST_PLAN_KEPT = "feasible ({cause}; fair shares of the GPUs attached now)"


def solve_stages(m: Program, cfg: PlannerConfig, deadline: float | None = None) -> SolverReport:
    """Solve `m.stages` in order before `deadline` (`cfg.clock` seconds; default
    `cfg.time_limit_s` from now) and leave the chosen solution in the variables."""
    began = cfg.clock()
    deadline = began + cfg.time_limit_s if deadline is None else deadline
    if not m.stages:
        return SolverReport(backend=backend_name(cfg), status=NOTHING, seconds=0.0, variables=0, constraints=0)
    driver = highs(m, cfg) if cfg.solver == "highs" and highs_available() else cbc(m, cfg)
    report, solved_any, refused = _solve_in_order(m, cfg, driver, deadline)
    if refused and driver.name == "HiGHS" and cfg.clock() < deadline:
        # A later stage is infeasible only if an earlier optimum leaned on HiGHS's integrality
        # tolerance (seen once in 2,799 plans of the teams simulation: CBC proves that optimum
        # unattainable). CBC solves every stage again; its plan is kept if it finishes in time.
        fallback = cbc(m, cfg)
        again, cbc_solved, _ = _solve_in_order(m, cfg, fallback, deadline)
        if again.status == OPTIMAL:
            again.backend = f"{fallback.name} (HiGHS called stage {refused} infeasible)"
            driver, report, solved_any = fallback, again, cbc_solved
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
        self.lazy = list(m.lazy)  # the program's rows held back, not yet given to the solver
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
            if value <= slack(self.floors.floor(i)):  # the solution before attains its floor
                self._keep(i, value, "floor met by the solution before it")
                return i + 1
        group = merged_stages(self.m.stages, self.m.held, self.floors, i)
        t0 = clock()
        found = self._solve(group.objective(self.m.stages), lambda: deadline - clock())
        return self._settle(i, group, found, clock() - t0, clock() >= deadline)

    def _solve(self, objective, seconds, **options) -> StageOutcome:
        """The driver's solve (`seconds()`: the time left). Where its solution breaks a row
        the program holds back (`Program.lazy`), that solution is none of the program's: every
        such row is given to the solver, and the stage solved again."""
        found = self.driver.solve(objective, seconds(), **options)
        if found.value is not None and any(_breaks(self.driver, row) for _, row in self.lazy):
            self.driver.add_rows(self.lazy)
            self.lazy = []
            found = self.driver.solve(objective, seconds(), **options)
        return found

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
                self.driver.keep_at_most(self.m.stages[j][1], slack(self.floors.floor(j)))
            self.driver.hold(self.m.held.get(self.m.stages[k][0], ()), False)
            group = merged_stages(self.m.stages, self.m.held, self.floors, k)
            t0 = clock()
            found = self._solve(group.objective(self.m.stages), lambda: deadline - clock(), retry=False)
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
        self.driver.keep_at_most(self.m.stages[j][1], slack(value))

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


def _breaks(driver, row: pulp.LpConstraint) -> bool:
    """Whether the driver's last solution breaks `row`, by more than the solvers' tolerance
    (`slack`'s)."""
    over = driver.value(row)  # left side less right side
    tolerance = slack(row.constant) - row.constant
    if row.sense == pulp.LpConstraintLE:
        return over > tolerance
    if row.sense == pulp.LpConstraintGE:
        return over < -tolerance
    return abs(over) > tolerance


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
