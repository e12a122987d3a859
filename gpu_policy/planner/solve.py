"""Solve the program's stages in order, each fixing the optimum of the last."""

from __future__ import annotations

import time

import pulp

from gpu_policy.errors import GpuPolicyError, SolverError
from gpu_policy.plan import SolverReport
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.program import Program

_STATUS = {1: "Optimal", 2: "Feasible (time limit)", 0: "Not solved", -1: "Infeasible", -2: "Unbounded"}


class _WarmHiGHS(pulp.HiGHS):
    """PuLP's in-process HiGHS, started from the variables' current values.

    Each stage's solution is feasible for the next stage (the next only adds the
    bound that keeps this one's optimum), so it is a good incumbent to start from.
    """

    def callSolver(self, lp):  # noqa: N802 (PuLP's name)
        import highspy

        values = [v.varValue for v in lp.variables()]
        if all(x is not None for x in values):
            start = highspy.HighsSolution()
            start.col_value = values
            start.value_valid = True
            lp.solverModel.setSolution(start)
        super().callSolver(lp)


def make_solver(cfg: PlannerConfig) -> pulp.LpSolver:
    """The solver named in the config, with deterministic, bounded options."""
    if cfg.solver == "highs":
        solver = _WarmHiGHS(msg=False, timeLimit=cfg.time_limit_s, gapRel=cfg.gap_rel,
                            threads=cfg.threads, random_seed=0)
        if not solver.available():
            raise GpuPolicyError("solver 'highs' needs highspy: pip install 'gpu-policy[highs]'")
        return solver
    # CBC's `-threads 1` switches on its threaded code, which here hung for the whole
    # time limit in about 1 solve in 100 under load; without the option CBC runs serially.
    # warmStart: each stage starts from the last stage's solution (a MIP start file).
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=cfg.time_limit_s, gapRel=cfg.gap_rel,
                             threads=None if cfg.threads == 1 else cfg.threads, warmStart=True,
                             options=["randomSeed 1", "randomCbcSeed 1"])


def solve_stages(m: Program, cfg: PlannerConfig) -> SolverReport:
    solver = make_solver(cfg)
    report = SolverReport(backend=solver.name, status="Optimal", seconds=0.0,
                          variables=0, constraints=0, gap=cfg.gap_rel)
    began = time.perf_counter()
    if not m.stages:  # nothing to decide: every job is fixed
        report.status = "Nothing to decide"
        return report
    for name, objective in m.stages:
        m.prob.setObjective(objective)
        t0 = time.perf_counter()
        try:
            m.prob.solve(solver)
        except pulp.PulpSolverError as e:
            raise SolverError(f"stage {name}: the solver failed: {e}") from e
        seconds = time.perf_counter() - t0
        status = m.prob.sol_status
        value = pulp.value(m.prob.objective) or 0.0
        report.stages.append({"name": name, "status": _STATUS.get(status, str(status)),
                              "objective": round(value, 9), "seconds": round(seconds, 4)})
        if status not in (1, 2):
            raise SolverError(f"stage {name}: no solution ({_STATUS.get(status, status)}); "
                              "keeping every running job is always feasible, so this is a bug")
        if status == 2:
            report.status, report.gap = _STATUS[2], None
        # later stages may not make this one worse (a small tolerance for round-off)
        m.prob += objective <= value + 1e-6 * max(1.0, abs(value)), f"fix_{name}"
    report.seconds = time.perf_counter() - began
    report.variables = m.prob.numVariables()
    report.constraints = m.prob.numConstraints()
    return report
