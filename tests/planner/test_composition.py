"""The planner's composition decision (issue 13 part B): what it attaches and detaches, in
which order of remedies, what it says, and that the program does not grow with the pool.
The scenario files tests/scenarios/compose-*.yaml pin the main cases with `--check`."""

import pytest
import yaml

from gpu_policy import PlannerConfig, load_scenario, parse_scenario, plan
import gpu_policy.planner.planner as planner
from gpu_policy.model.apply import apply_plan
from gpu_policy.actions.cycle import plan_with_telemetry
from gpu_policy.planner.core.fair_share import fair_shares
from gpu_policy.model.plan import Composition
from tests.conftest import SCENARIOS
from tests.planner.checker import check_plan
from tests.planner.composable_clusters import composable_scenario


def scenario(name: str) -> dict:
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())


def changes(result) -> dict[str, int]:
    return result.changes_by_node()


def test_the_program_does_not_grow_with_the_pool():
    """Composable nodes have their own variables; a pool of 90,000 GPUs and a node that
    could hold 1,024 make the same program as a pool of 6."""
    small = parse_scenario(scenario("compose-attach-instead-of-preempt"))
    data = scenario("compose-attach-instead-of-preempt")
    data["composable"]["pools"][0]["free"] = 90_000
    data["composable"]["nodes"][0]["max_gpus"] = 1024
    large = parse_scenario(data)
    a, b = plan(small), plan(large)
    assert (a.solver.variables, a.solver.constraints) == (b.solver.variables, b.solver.constraints)
    assert changes(a) == changes(b) == {"node-3": 4}
    assert [(d.name, d.action) for d in a.jobs] == [(d.name, d.action) for d in b.jobs]


def test_a_large_cluster_attaches_too():
    """Above `exact_nodes` the greedy scope details every composable node."""
    nodes = [{"name": f"n{i}", "gpus": 8, "gpu_model": "A100"} for i in range(40)]
    nodes.append({"name": "c", "gpus": 2, "gpu_model": "A100"})
    jobs = [{"name": f"a{i}", "queue": "a", "gpus": 8, "running": [f"n{i}"]} for i in range(40)]
    jobs += [{"name": "b1", "queue": "b", "gpus": 2, "running": ["c"]}, {"name": "b2", "queue": "b", "gpus": 4}]
    s = parse_scenario({"nodes": nodes, "queues": [{"name": "a", "deserved": 320}, {"name": "b", "deserved": 10}],
                        "jobs": jobs, "composable": {"pools": [{"model": "A100", "free": 6}],
                                                     "nodes": [{"name": "c", "max_gpus": 8}]}})
    result = plan(s)
    check_plan(s, result)
    assert changes(result) == {"c": 4}
    assert result.job("b2").action == "start" and result.job("b2").replicas[0].gpu_indices == [2, 3, 4, 5]
    assert result.summary["preemptions"] == 0


def full_cluster(waiting: list[dict], before_preemption: bool = True, pool: int = 2) -> dict:
    """node-1 (4 GPUs) is full; node-2 (2 GPUs, full) may hold 4; team-a is at its share."""
    return {"nodes": [{"name": "node-1", "gpus": 4, "gpu_model": "A100"},
                      {"name": "node-2", "gpus": 2, "gpu_model": "A100"}],
            "queues": [{"name": "a", "deserved": 3}, {"name": "b", "deserved": 3}],
            "jobs": [{"name": "a1", "queue": "a", "gpus": 3, "running": ["node-1"]},
                     {"name": "b1", "queue": "b", "gpus": 1, "running": ["node-1"]},
                     {"name": "b2", "queue": "b", "gpus": 1, "running": ["node-2"]},
                     {"name": "a2", "queue": "a", "gpus": 1, "running": ["node-2"]}, *waiting],
            "composable": {"pools": [{"model": "A100", "free": pool}], "nodes": [{"name": "node-2", "max_gpus": 4}],
                           "before_preemption": before_preemption}}


def test_fractions_share_one_attached_gpu():
    s = parse_scenario(full_cluster([{"name": "f1", "queue": "b", "gpus": 0.5, "submitted_at": 1},
                                     {"name": "f2", "queue": "b", "gpus": 0.5, "submitted_at": 2}]))
    result = plan(s)
    check_plan(s, result)
    assert changes(result) == {"node-2": 1}
    assert [(d.action, d.replicas[0].gpu_indices) for d in (result.job("f1"), result.job("f2"))] == \
        [("start", [2]), ("start", [2])]
    assert result.job("f1").reason == "starts when 1 A100 is attached to node-2, about 120 s"


def test_attach_before_reclaim_and_reclaim_before_attach():
    """team-a holds 4 GPUs, above its fair share of 3; b3 is owed its GPU. Attaching comes
    before preemption; with before_preemption: false, reclaim comes first."""
    waiting = [{"name": "b3", "queue": "b", "gpus": 1, "submitted_at": 5}]
    attach = plan(parse_scenario(full_cluster(waiting)))
    assert changes(attach) == {"node-2": 1} and attach.summary["preemptions"] == 0
    reclaim = plan(parse_scenario(full_cluster(waiting, before_preemption=False)))
    assert changes(reclaim) == {} and reclaim.job("a2").action == "preempt" and reclaim.job("b3").action == "start"
    names = [stage["name"] for stage in attach.solver.stages]
    assert names.index("starts") < names.index("attach")  # and the preemption stages before both
    assert all(names.index(n) < names.index("attach") for n in names if n.startswith("preemption"))


def test_reclaim_first_attaches_only_for_work_owed_its_share():
    """b3 and b4 would take team-b above its fair share (borrowing): attaching before
    preemption starts them on GPUs attached to node-2; with before_preemption: false the
    pool is kept for work owed its share, so they wait."""
    waiting = [{"name": "b3", "queue": "b", "gpus": 1, "submitted_at": 5},
               {"name": "b4", "queue": "b", "gpus": 1, "submitted_at": 6}]
    data = full_cluster(waiting)
    data["queues"] = [{"name": "a", "deserved": 4}, {"name": "b", "deserved": 2}]  # both at their shares
    first = plan(parse_scenario(data))
    assert changes(first) == {"node-2": 2} and first.summary["starts"] == 2
    data["composable"]["before_preemption"] = False
    s = parse_scenario(data)
    second = plan(s)
    assert changes(second) == {} and second.job("b4").action == "wait"
    assert "above its fair share" in second.job("b4").reason


def test_a_node_without_a_model_takes_one():
    """cpu-node takes any model, but one: the H100 job gets it, the A100 job node-2."""
    data = full_cluster([{"name": "h", "queue": "b", "gpus": 2, "gpu_model": ["H100"], "submitted_at": 1},
                         {"name": "x", "queue": "b", "gpus": 1, "gpu_model": ["A100"], "submitted_at": 2}])
    data["queues"][1]["deserved"] = 8
    data["nodes"].append({"name": "cpu-node", "gpus": 0})
    data["composable"]["nodes"].append({"name": "cpu-node", "max_gpus": 4})
    data["composable"]["pools"].append({"model": "H100", "free": 4})
    s = parse_scenario(data)
    result = plan(s)
    check_plan(s, result)
    assert sorted((c.node, c.model, c.change) for c in result.compositions) == [("cpu-node", "H100", 2),
                                                                              ("node-2", "A100", 1)]
    assert apply_plan(s, result).node("cpu-node").gpu_model == "H100"


DETACH = SCENARIOS / "compose-detach-idle.yaml"


def test_idle_gpus_are_detached_only_with_telemetry():
    s = load_scenario(DETACH)
    assert plan(s).compositions == []  # no telemetry: nothing is known to be idle
    result = plan_with_telemetry(s)
    assert result.compositions == [Composition("node-3", "A100-80GB", -2,
                                               "idle for 60 min (idle_detach_s: 30 min); no waiting job can use them")]


def test_a_gpu_a_job_holds_is_not_detached():
    """b-1 holds the attached GPUs 6 and 7 and has sat idle for an hour: it may be preempted
    some day, but its GPUs do not go back under it."""
    data = yaml.safe_load(DETACH.read_text())
    data["jobs"][1].update(gpus=8, gpu_indices=[list(range(8))])
    data["telemetry"] = {"jobs": {"b-1": {"utilization": 0}}}
    result = plan_with_telemetry(parse_scenario(data))
    assert result.compositions == [] and result.telemetry["idle_jobs"] == {"b-1": 3600}


def test_detach_takes_the_highest_idle_gpus_first():
    """GPU 7 is free and idle, GPU 6 is held: a detach gives back the highest GPUs, so
    only GPU 7 may go."""
    data = yaml.safe_load(DETACH.read_text())
    data["jobs"][1].update(gpus=7, gpu_indices=[list(range(7))])
    result = plan_with_telemetry(parse_scenario(data))
    assert changes(result) == {"node-3": -1}


def test_a_plan_cut_off_detaches_nothing():
    s = load_scenario(SCENARIOS / "compose-no-detach-while-waiting.yaml")
    result = plan_with_telemetry(s, config=PlannerConfig(time_limit_s=1e-6))
    assert result.solver.status == "feasible (time limit)" and result.compositions == []


#: A budget no loaded machine runs out of: these tests are about decisions, not time.
GENEROUS = PlannerConfig(time_limit_s=600.0)


def test_fair_shares_count_the_gpus_the_plan_attaches():
    """A random cluster where a GPU attached for q1 raises q1's fair share from 3 to 4:
    with shares of the GPUs before the attach, the next plan would reclaim for q1."""
    s = parse_scenario(composable_scenario(31))
    first = plan_with_telemetry(s, config=GENEROUS)
    assert first.solver.status == "Optimal" and first.summary["attached"] == 1
    reported = {q.name: q.fair_share for q in first.queues}
    assert fair_shares(s) == {"q0": 3, "q1": 3}
    assert reported == fair_shares(s, s.gpus_schedulable + 1) == {"q0": 3, "q1": 4}
    again = plan_with_telemetry(apply_plan(s, first), config=GENEROUS)
    assert again.summary["preemptions"] == again.summary["starts"] == again.summary["attached"] == 0


class FakeClock:
    """Seconds that pass only when the test says so: a budget squeezed without load."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


BUDGET_S = 600.0


def test_the_plan_made_again_has_its_own_share_of_the_budget(monkeypatch):
    """The first plan overruns the whole budget (as on a loaded machine); the plan made
    again with the GPUs it attaches still has its own share, and decides as with a
    generous budget. The budget is large and the overrun is on the fake clock: the solver's
    own limits are real seconds, and a third of 600 s is more than a loaded machine needs."""
    clock = FakeClock()
    decide_once = planner._decide

    def decide(*args):
        result = decide_once(*args)
        clock.now += BUDGET_S  # every plan takes the whole budget
        return result

    monkeypatch.setattr(planner, "_decide", decide)
    s = parse_scenario(composable_scenario(31))
    squeezed = plan_with_telemetry(s, config=PlannerConfig(time_limit_s=BUDGET_S, clock=clock))
    monkeypatch.setattr(planner, "_decide", decide_once)
    generous = plan_with_telemetry(s, config=GENEROUS)
    assert squeezed.solver.status == generous.solver.status == "Optimal"
    assert [(j.name, j.action) for j in squeezed.jobs] == [(j.name, j.action) for j in generous.jobs]
    assert {q.name: q.fair_share for q in squeezed.queues} == {"q0": 3, "q1": 4}
    assert squeezed.compositions == generous.compositions and not squeezed.warnings


def test_a_second_plan_cut_off_leaves_the_first(monkeypatch):
    """When the plan made again with the capacity the first plan's compositions leave is cut
    off by the deadline, the first plan stands (shares of the GPUs attached now), and its
    status and a warning say so."""
    made = []

    def decide(*args):
        result = decide_once(*args)
        made.append(args[4])  # the capacity fair shares counted
        if len(made) > 1:
            result.solver.status = "feasible (time limit)"
        return result

    decide_once = planner._decide
    monkeypatch.setattr(planner, "_decide", decide)
    s = parse_scenario(composable_scenario(31))
    result = plan_with_telemetry(s, config=GENEROUS)
    assert made == [s.gpus_schedulable, s.gpus_schedulable + 1]
    assert result.solver.status == "feasible (time limit; fair shares of the GPUs attached now)"
    assert result.summary["attached"] == 1
    assert {q.name: q.fair_share for q in result.queues} == fair_shares(s) == {"q0": 3, "q1": 3}
    assert any(w.startswith(f"fair shares count the {s.gpus_schedulable} GPUs attached now, not the "
                            f"{s.gpus_schedulable + 1} the plan's compositions leave (time limit)")
               for w in result.warnings)


def test_plans_that_never_agree_keep_the_first_and_say_so(monkeypatch):
    """Every plan made again changes the capacity once more: after three plans the first
    stands, and its status says no plan agreed."""
    calls = []

    def capacity_after(attached, result):
        calls.append(result)
        return attached + len({id(r) for r in calls})  # each plan a new capacity

    monkeypatch.setattr(planner, "_capacity_after", capacity_after)
    s = parse_scenario(composable_scenario(31))
    result = plan_with_telemetry(s, config=GENEROUS)
    assert result.solver.status == ("feasible (no plan agrees with the shares it assumed; "
                                    "fair shares of the GPUs attached now)")
    assert {q.name: q.fair_share for q in result.queues} == {"q0": 3, "q1": 3}


@pytest.mark.parametrize("name,reason", [
    ("compose-needs-new-node", "needs a new node: attaching GPUs cannot help, no composable node has 48 CPUs free "
                               "(the most is 16, on node-3)"),
    ("compose-pool-exhausted", "attaching cannot help: a composable node could offer at most 3 free GPUs (node-3 may "
                               "hold 8 GPUs, and the pool has 2 A100-80GB free)"),
    ("compose-node-at-max", "attaching cannot help: a composable node could offer at most 0 free GPUs (node-3 is at "
                            "its max_gpus of 8)"),
])
def test_a_wait_says_why_attaching_cannot_help(name, reason):
    result = plan(load_scenario(SCENARIOS / f"{name}.yaml"))
    assert reason in result.job("b-new").reason


def test_compositions_say_why():
    result = plan(load_scenario(SCENARIOS / "compose-attach-instead-of-preempt.yaml"))
    assert result.compositions == [Composition(
        "node-3", "A100-80GB", 4, "b-new (4 GPUs) starts on them: free GPUs and moves could not hold it, and "
                                  "attaching comes before preemption")]
    assert result.job("b-new").reason == "starts when 4 A100-80GB are attached to node-3, about 120 s"


def test_the_checker_catches_a_composition_beyond_the_pool():
    s = load_scenario(SCENARIOS / "compose-attach-instead-of-preempt.yaml")
    result = plan(s)
    result.compositions = [Composition("node-3", "A100-80GB", 7, "too many")]
    with pytest.raises(AssertionError, match="node-3: attaches beyond max_gpus or the pool"):
        check_plan(s, result)
