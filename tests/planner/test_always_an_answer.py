"""The planner always answers with a valid plan: awkward names, many jobs on few nodes,
many waiting jobs on many nodes, a budget too small to solve anything, a solver that
finds nothing. No assertion here depends on how fast the machine is: a plan cut off by
its budget must be just as valid (bench/plan_scale.py measures the budget itself)."""

import random
import re

import pytest

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.planner.core import solvers
from tests.planner.checker import check_plan

CUT_OFF_OR_DONE = {"Optimal", "feasible (time limit)", "Nothing to decide"}


def test_awkward_names():
    # names PuLP once choked on ('a-1' and 'a_1' made the same constraint name), unicode, 200 characters
    long = "x" * 200
    s = parse_scenario({
        "nodes": [{"name": "node-1", "gpus": 4}, {"name": "node_1", "gpus": 4}, {"name": "nœud-é", "gpus": 4}],
        "queues": [{"name": "team-1", "deserved": 4}, {"name": "team_1", "deserved": 4}, {"name": "équipe ☃", "deserved": 4}],
        "jobs": [{"name": "a-1", "queue": "team-1", "gpus": 2, "running": ["node-1"]},
                 {"name": "a_1", "queue": "team_1", "gpus": 2, "running": ["node_1"]},
                 {"name": "a 1", "queue": "team-1", "gpus": 4, "running": ["nœud-é"]},
                 {"name": "tâche-ü", "queue": "équipe ☃", "gpus": 2},
                 {"name": long, "queue": "équipe ☃", "gpus": 0.5},
                 {"name": long[:-1] + "-", "queue": "team_1", "gpus": 1, "replicas": 2}],
    })
    result = plan(s)
    check_plan(s, result)
    assert {d.name for d in result.jobs if d.action == "start"} >= {"tâche-ü", long}


def many_jobs_on_few_nodes(seed: int = 0) -> dict:
    """10 nodes x 8 GPUs, 40 running jobs, 9,960 waiting: 10,000 jobs."""
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "gpus": 8} for i in range(10)]
    queues = [{"name": f"q{i}", "deserved": 20 + 5 * i} for i in range(3)]
    jobs = [{"name": f"r{i}", "queue": f"q{i % 3}", "gpus": 2, "running": [f"n{i // 4}"], "priority": rng.choice([10, 50])}
            for i in range(40)]
    jobs += [{"name": f"w{i}", "queue": f"q{rng.randrange(3)}", "gpus": rng.choice([0.5, 1, 2, 4, 8]),
              "replicas": rng.choice([1, 1, 2]), "priority": rng.choice([10, 50, 100]), "submitted_at": i}
             for i in range(9960)]
    return {"nodes": nodes, "queues": queues, "jobs": jobs}


def test_ten_thousand_jobs_on_ten_nodes():
    s = parse_scenario(many_jobs_on_few_nodes())
    result = plan(s)
    check_plan(s, result)
    assert result.solver.status in CUT_OFF_OR_DONE


def test_two_thousand_waiting_jobs_on_a_thousand_nodes():
    from bench.instances import scale_instance

    data = scale_instance(1000)
    rng = random.Random(1)
    data["jobs"] = [j for j in data["jobs"] if j.get("running")] + [
        {"name": f"wait-{i}", "queue": f"team-{rng.randrange(10)}", "gpus": rng.choice([1, 2, 4, 8]),
         "submitted_at": 10**6 + i} for i in range(2000)]
    s = parse_scenario(data)
    result = plan(s)
    check_plan(s, result)
    assert result.solver.status in CUT_OFF_OR_DONE


@pytest.mark.parametrize("budget", [1e-4, 0.05])
def test_a_tiny_budget_still_answers(budget):
    from tests.planner.random_clusters import random_scenario

    s = parse_scenario(random_scenario(7, (100, 100), (25, 25)))
    result = plan(s, PlannerConfig(time_limit_s=budget))
    check_plan(s, result)
    assert result.solver.status in CUT_OFF_OR_DONE


@pytest.mark.parametrize("runs_out", [False, True])
def test_a_stage_without_a_solution_keeps_the_last_one(monkeypatch, runs_out):
    """When a stage ends with nothing, the plan falls back on the solution before it: for the
    first stage, keep every running job, start nothing. The status says whether the budget
    ran out (the fake solver sleeps through the time it is given) or a stage found nothing."""
    import time

    from tests.planner.random_clusters import random_scenario

    def nothing(self, objective, seconds, retry=True):
        if runs_out:
            time.sleep(seconds)
        return solvers.StageOutcome("no solution", None)

    monkeypatch.setattr(solvers._Highs, "solve", nothing)
    s = parse_scenario(random_scenario(5))
    result = plan(s, PlannerConfig(time_limit_s=0.5 if runs_out else 600))
    check_plan(s, result)
    assert result.solver.status == ("feasible (time limit)" if runs_out else "feasible (a stage found no solution)")
    assert {d.action for d in result.jobs} <= {"keep", "wait"}
    assert all(d.reason for d in result.jobs if d.action == "wait")


def test_no_jobs_is_nothing_to_decide():
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 2}], "queues": [{"name": "q"}], "jobs": []})
    result = plan(s)
    assert result.solver.status == "Nothing to decide" and result.jobs == []


def test_a_moved_job_whose_gpus_were_taken_restarts_elsewhere_on_its_node():
    """Jobs of one shape are interchangeable to the program: a moved job may be given a place
    on its own node whose GPUs fractions took; it then restarts on other GPUs of that node."""
    from tests.planner.random_clusters import rich_scenario

    data = rich_scenario(4)
    nodes, jobs = [], []
    for copy in range(6):  # grow past exact_nodes: the reclaim nodes and pools of large clusters
        nodes += [{**n, "name": f"{n['name']}-{copy}"} for n in data["nodes"]]
        for j in data["jobs"]:
            jobs.append({**j, "name": f"{j['name']}-{copy}",
                         **({"running": [f"{x}-{copy}" for x in j["running"]]} if "running" in j else {})})
    s = parse_scenario({"nodes": nodes, "queues": data["queues"], "jobs": jobs})
    check_plan(s, plan(s))


def test_a_stage_presolve_calls_infeasible_is_solved_without_presolve():
    """HiGHS 1.16's presolve called this round's first stage infeasible (the do-nothing plan
    is feasible, so it cannot be): the stage is solved again without presolve, and the plan
    is optimal, with CBC's decisions."""
    from pathlib import Path

    from gpu_policy import load_scenario

    if not solvers.highs_available():
        pytest.skip("highspy is not installed: the CBC fallback has no presolve to retry")
    s = load_scenario(Path(__file__).parent / "data" / "highs-presolve-infeasible.yaml")
    highs = plan(s, PlannerConfig(solver="highs", time_limit_s=600))
    check_plan(s, highs)
    assert highs.solver.status == "Optimal" and all(st["status"] == "Optimal" for st in highs.solver.stages)
    cbc = plan(s, PlannerConfig(solver="cbc", time_limit_s=600))
    started = lambda p: sorted(d.name for d in p.jobs if d.action == "start")  # noqa: E731
    assert started(highs) == started(cbc) and len(started(highs)) == 2


def test_a_fair_share_optimum_highs_could_lean_on_its_tolerance_for_is_right():
    """At its default tolerances, without a cutoff, HiGHS 1.16 accepted a fair-share optimum
    (1.0) here that CBC proves unattainable (3.0), then found the next stage infeasible, and
    the stages were solved again with CBC. Whichever way the plan gets there, it is optimal,
    its fair-share stage is CBC's, and so are its decisions."""
    from pathlib import Path

    from gpu_policy import load_scenario

    if not solvers.highs_available():
        pytest.skip("highspy is not installed: plans are CBC's already")
    s = load_scenario(Path(__file__).parent / "data" / "highs-tolerance.yaml")
    result = plan(s, PlannerConfig(solver="highs", time_limit_s=600))
    check_plan(s, result)
    assert result.solver.status == "Optimal"
    assert re.fullmatch(r"HiGHS|PULP_CBC_CMD \(HiGHS called stage \w+ infeasible\)", result.solver.backend)
    fair_share = next(st for st in result.solver.stages if st["name"] == "fair_share")
    assert fair_share["objective"] == pytest.approx(3.0)
    cbc = plan(s, PlannerConfig(solver="cbc", time_limit_s=600))
    assert _decided(result) == _decided(cbc)


def test_a_later_stage_highs_calls_infeasible_is_solved_again_with_cbc(monkeypatch):
    """A later stage is infeasible only where an earlier optimum leaned on HiGHS's integrality
    tolerance. Made to happen here: HiGHS calls its first solve after a solution
    infeasible. CBC solves every stage again; the plan is CBC's, optimal, and says why."""
    from tests.planner.random_clusters import random_scenario

    if not solvers.highs_available():
        pytest.skip("highspy is not installed: plans are CBC's already")
    real, refused = solvers._Highs.solve, []

    def infeasible_once(self, objective, seconds, retry=True):
        if self.values is not None and retry and not refused:
            refused.append(objective)
            return solvers.StageOutcome("no solution (Infeasible)", None, infeasible=True)
        return real(self, objective, seconds, retry)

    monkeypatch.setattr(solvers._Highs, "solve", infeasible_once)
    s = parse_scenario(random_scenario(5))
    result = plan(s, PlannerConfig(solver="highs", time_limit_s=600))
    check_plan(s, result)
    assert refused and result.solver.status == "Optimal"
    assert re.fullmatch(r"PULP_CBC_CMD \(HiGHS called stage \w+ infeasible\)", result.solver.backend)
    cbc = plan(s, PlannerConfig(solver="cbc", time_limit_s=600))
    assert _decided(result) == _decided(cbc)


def _decided(result) -> list[tuple[str, str]]:
    return sorted((d.name, d.action) for d in result.jobs if d.action != "keep")
