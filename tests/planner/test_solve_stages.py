"""Stages solved in fewer solves (`solve.merged_stages`, `solve.Floors`) keep the strict order."""

from __future__ import annotations

from pathlib import Path

import pulp
import pytest

from gpu_policy import PlannerConfig, load_scenario, plan
from gpu_policy.planner.core import solve
from gpu_policy.planner.core.program import Program, affine
from tests.conftest import scenario_files

SHARED = Path("/work/shared/scenarios")


def _program(*stages) -> Program:
    m = Program(pulp.LpProblem("t", pulp.LpMinimize))
    m.stages = list(stages)
    return m


def _two_goals() -> tuple[Program, pulp.LpVariable, pulp.LpVariable]:
    """x or y (not both); first most x, then most 10 y: the order says x, a sum with equal
    weights says y."""
    x, y = pulp.LpVariable("x", 0, 1, "Binary"), pulp.LpVariable("y", 0, 1, "Binary")
    m = _program(("first", affine({x: -1})), ("then", affine({y: -10})))
    m.prob += affine({x: 1, y: 1}) <= 1, "one"
    return m, x, y


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_a_weighted_merge_keeps_the_order(solver):
    m, x, y = _two_goals()
    z = pulp.LpVariable("z", 0, 1, "Binary")
    m.prob += affine({z: 1}) <= 0.5, "z_small"  # z = 0, so the first stage ends above its floor, -1.5:
    m.stages[0] = ("first", affine({x: -1, z: -1}))  # bounding it there finds nothing, and it is solved
    report = solve.solve_stages(m, PlannerConfig(solver=solver))
    assert (x.varValue, y.varValue) == (1, 0)
    assert [(s["name"], s["settled"]) for s in report.stages] == [("first", "solved"), ("then", "merged into first")]
    group = solve.merged_stages(m.stages, m.held, solve.Floors(m.prob, m.stages), 0)
    assert group.stop == 2 and group.weights[0] * 1 > 10 * group.weights[1]  # step 1, span 10


def test_too_small_a_weight_would_choose_otherwise():
    m, x, y = _two_goals()
    m.stages = [("sum", affine({x: -1, y: -10}))]  # weight 1 on the first goal: not enough
    solve.solve_stages(m, PlannerConfig())
    assert (x.varValue, y.varValue) == (0, 1)


def test_no_merge_where_the_weight_would_leave_exact_numbers():
    x = pulp.LpVariable("x", 0, 1, "Binary")
    y = pulp.LpVariable("y", 0, 10 ** 7, "Integer")
    m = _program(("first", affine({x: -1})), ("then", affine({y: 1})))
    group = solve.merged_stages(m.stages, m.held, solve.Floors(m.prob, m.stages), 0)
    assert group.stop == 1


def test_a_held_stage_is_never_merged_into_the_one_before():
    m, x, y = _two_goals()
    m.held = {"then": [y]}
    report = solve.solve_stages(m, PlannerConfig())
    assert [s["settled"] for s in report.stages] == ["solved", "solved"]
    assert (x.varValue, y.varValue) == (1, 0)


def test_a_stage_whose_floor_is_met_is_not_solved():
    """keep + move <= 1: "preempted" = 1 - keep - move has floor 0 (not -1), which the first
    stage's solution (move: short ends above its own floor, so it is solved) already meets."""
    keep, move = pulp.LpVariable("keep", 0, 1, "Binary"), pulp.LpVariable("move", 0, 1, "Binary")
    short = pulp.LpVariable("short", 0)
    m = _program(("short", affine({short: 1})), ("preempted", affine({keep: -1, move: -1}, 1.0)))
    m.prob += affine({keep: 1, move: 1}) <= 1, "once"
    m.prob += affine({short: 1, move: 2}) >= 3, "short"  # short ends at 1, above its floor (0): solved
    m.prob += affine({keep: 1}) <= 0.5, "keep_small"  # keep = 0
    floors = solve.Floors(m.prob, m.stages)
    assert (floors.floor(1), floors.span(1)) == (0.0, 1.0)
    report = solve.solve_stages(m, PlannerConfig())
    assert report.stages[1]["settled"] == "floor met by the solution before it"
    assert report.stages[1]["objective"] == 0 and (keep.varValue, move.varValue) == (0, 1)


def test_a_cover_row_pays_for_what_it_covers():
    """inside <= cut_a + cut_b (a gang's part preempted inside its queue is at most its cuts):
    "preempted for other queues", c (cut_a + cut_b - inside), has floor 0, not -c. Each cut
    pays once: a second variable covered by the same cuts lowers the floor again, and a cut
    costing less than what it covers pays nothing."""
    cut_a, cut_b, inside, other = (pulp.LpVariable(n, 0, 1, "Binary") for n in ("cut_a", "cut_b", "inside", "other"))
    c = 7.000000000000001
    m = _program(("cross", affine({cut_a: c, cut_b: 7.0, inside: -c})),  # cut_b short by rounding only
                 ("twice", affine({cut_a: 3, cut_b: 3, inside: -3, other: -3})),
                 ("cheap", affine({cut_a: 1, cut_b: 3, inside: -3})))
    m.prob += affine({cut_a: 1, cut_b: 1, inside: -1}) >= 0, "inside"
    m.prob += affine({other: 1, cut_a: -1, cut_b: -1}) <= 0, "other"
    floors = solve.Floors(m.prob, m.stages)
    assert floors.floor(0) == 0.0
    assert floors.floor(1) == -3.0  # the cuts paid for inside; other is on its own
    assert floors.floor(2) == -3.0  # cut_a (1) cannot pay for inside (3)


def test_a_wrong_floor_guess_drops_the_last_bound_only():
    """"none" and "few" both have floor 0, but "few" cannot reach it: bounding both finds
    nothing, so "few" is solved with "none" bounded, and "none" is still proved at its floor
    by that solve (not solved on its own)."""
    a, b, c = (pulp.LpVariable(n, 0, 1, "Binary") for n in "abc")
    m = _program(("none", affine({a: 1})), ("few", affine({b: 1})), ("most", affine({c: -1})))
    m.prob += affine({b: 1, c: 1}) >= 1, "b_or_c"
    m.prob += affine({c: 1}) <= 0.5, "no_c"  # so b = 1: "few" ends at 1, above its floor
    m.prob += affine({a: 1, b: 1}) <= 2, "columns"
    report = solve.solve_stages(m, PlannerConfig())
    assert [(s["name"], s["settled"]) for s in report.stages] == [
        ("none", "at its floor (proved by few)"), ("few", "solved"), ("most", "merged into few")]
    assert (a.varValue, b.varValue, c.varValue) == (0, 1, 0)


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_leading_stages_at_their_floors_are_proved_by_the_next_solve(solver):
    """Before anything is solved, the leading stages are bounded at their floors and the next
    stage solved: its solution proves them optimal (a floor is a lower bound). CBC solves
    them one by one."""
    m, x, y = _two_goals()
    m.stages[0] = ("first", affine({x: -1}, 1.0))  # x not chosen: floor 0 (a floor below 0 is not tried)
    report = solve.solve_stages(m, PlannerConfig(solver=solver))
    assert (x.varValue, y.varValue) == (1, 0)
    settled = [("first", "at its floor (proved by then)"), ("then", "solved")] if solver == "highs" else [
        ("first", "solved"), ("then", "merged into first")]
    assert [(s["name"], s["settled"]) for s in report.stages] == settled
    assert report.stages[0]["objective"] == 0


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_a_row_held_back_comes_in_once_a_solution_breaks_it(solver):
    """Rows held back (`Program.lazy`) reach the solver only when a solution breaks one:
    then all of them, and the stage is solved again; one no solution breaks never does."""
    x, y = pulp.LpVariable("x", 0, 1, "Binary"), pulp.LpVariable("y", 0, 1, "Binary")
    m = _program(("most", affine({x: -1, y: -2})))
    m.prob += affine({x: 1, y: 1}) <= 2, "both"
    m.lazy = [("one", affine({x: 1, y: 1}) <= 1), ("never", affine({x: 1}) >= 0)]
    report = solve.solve_stages(m, PlannerConfig(solver=solver))
    assert (x.varValue, y.varValue) == (0, 1)
    assert report.stages[0]["objective"] == -2 and report.constraints == 4  # both held back in, and the bound

    m = _program(("most", affine({x: -1, y: -2})))
    m.prob += affine({x: 1, y: 1}) <= 2, "both"
    m.lazy = [("never", affine({x: 1}) >= 0)]
    report = solve.solve_stages(m, PlannerConfig(solver=solver))
    assert (x.varValue, y.varValue) == (1, 1) and report.constraints == 2  # "both" and the stage's bound


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_a_row_held_back_may_bring_a_variable_of_its_own(solver):
    """A variable that only a row held back holds is the solver's from the start, so that
    the row comes in whole: x <= z lets x be 1 once z is (the row without z would forbid x)."""
    x, z = pulp.LpVariable("x", 0, 1, "Binary"), pulp.LpVariable("z", 0, 1)
    m = _program(("most", affine({x: -1})))
    m.lazy = [("x_at_most_z", affine({x: 1, z: -1}) <= 0)]
    solve.solve_stages(m, PlannerConfig(solver=solver))
    assert (x.varValue, z.varValue) == (1, 1)


def test_a_row_held_back_outlives_a_wrong_floor_guess():
    """Bounding "short" at its floor (0) needs x = 1, which a row held back forbids: the
    solution of the guess breaks it, the row comes in, the guess finds nothing and its bound
    goes, the row stays (it is the program's), and "short" is solved with it: 1."""
    x, y = pulp.LpVariable("x", 0, 1, "Binary"), pulp.LpVariable("y", 0, 1, "Binary")
    short = pulp.LpVariable("short", 0)
    m = _program(("short", affine({short: 1})), ("most", affine({y: -1})))
    m.prob += affine({short: 1, x: 1}) >= 1, "short"
    m.prob += affine({x: 1, y: 1}) <= 2, "both"
    m.lazy = [("no_x", affine({x: 1}) <= 0)]
    report = solve.solve_stages(m, PlannerConfig())
    assert (x.varValue, y.varValue, short.varValue) == (0, 1, pytest.approx(1))
    assert [(s["name"], s["objective"]) for s in report.stages] == [("short", pytest.approx(1)), ("most", -1)]


def test_a_stage_off_the_lattice_is_not_merged():
    """0.5 x + y with x, y continuous can sit anywhere: no weight proves its order."""
    x, y = pulp.LpVariable("x", 0, 1), pulp.LpVariable("y", 0, 1, "Binary")
    m = _program(("first", affine({x: 0.5})), ("then", affine({y: -1})))
    assert solve.merged_stages(m.stages, m.held, solve.Floors(m.prob, m.stages), 0).stop == 1


def test_no_merge_with_a_relative_gap():
    m, x, y = _two_goals()
    report = solve.solve_stages(m, PlannerConfig(gap_rel=0.01))
    assert [s["settled"] for s in report.stages] == ["solved", "solved"] and x.varValue == 1


@pytest.mark.parametrize("objective, step", [({"i": 2, "j": 4}, 2.0), ({"i": 0.5, "j": 1.5}, 0.5),
                                             ({"i": 1, "c": 1}, None), ({"i": 0.1234567}, None)])
def test_lattice_step(objective, step):
    variables = {"i": pulp.LpVariable("i", 0, 5, "Integer"), "j": pulp.LpVariable("j", 0, 5, "Integer"),
                 "c": pulp.LpVariable("c", 0, 5)}
    assert solve.lattice_step(affine({variables[k]: a for k, a in objective.items()})) == step


def _unmerged(monkeypatch) -> None:
    """Every stage solved alone, as before merging: no floors, no weights."""
    monkeypatch.setattr(solve, "Floors", lambda prob, stages: None)


def test_merged_plans_equal_unmerged_ones(monkeypatch):
    """Settling stages by floors and merged solves ends every stage where solving each alone
    does, with the same action for every job. Where two placements price the same in every
    stage (a fraction on a shared GPU or a whole one of equal packing value), which one HiGHS
    returns depends on its search path, so placements are not compared."""
    files = scenario_files() + (sorted(SHARED.glob("*.yaml")) if SHARED.is_dir() else [])
    merged = {path: plan(load_scenario(path)) for path in files}
    _unmerged(monkeypatch)
    for path in files:
        alone = plan(load_scenario(path))
        assert [(j.name, j.action) for j in merged[path].jobs] == [(j.name, j.action) for j in alone.jobs], path.name
        assert [s["name"] for s in merged[path].solver.stages] == [s["name"] for s in alone.solver.stages]
        for m, a in zip(merged[path].solver.stages, alone.solver.stages):
            assert m["objective"] == pytest.approx(a["objective"], rel=1e-6, abs=1e-6), (path.name, m["name"])
