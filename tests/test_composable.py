"""GPU composition around the planner's decision (issue 13): the scenario's `composable:`
section, compositions in the Plan and `--check`, and what carrying them out does to the
embedded cluster. Most plans with compositions here are made by hand (tests/compose_helpers.py);
the planner's own decisions are tested in tests/planner/test_composition.py."""

import json

import pytest
import yaml

from gpu_policy import Job, ScenarioError, load_scenario, parse_scenario, plan
from gpu_policy.model.apply import apply_plan
from gpu_policy.presentation.check import differences
from gpu_policy.cli import main
from gpu_policy.cluster import ScenarioCluster
from gpu_policy.actions.cycle import apply_plan_once, wait_for_step
from gpu_policy.model.composition import attachable, describe, detachable, node_takes, uses_new_gpus
from gpu_policy.model.plan import Composition
from gpu_policy.presentation.render import layout_before_after, plan_table
from gpu_policy.model.scenario_dump import scenario_to_dict
from tests.compose_helpers import composed_plan
from tests.conftest import SCENARIOS

ATTACH = SCENARIOS / "compose-attach-instead-of-preempt.yaml"
DETACH = SCENARIOS / "compose-detach-idle.yaml"
MODELS = SCENARIOS / "compose-model-constraints.yaml"

NODES = "nodes: [{name: n1, gpus: 4, gpu_model: A100}, {name: n2, gpus: 0}]\nqueues: [{name: q}]\njobs: []\n"
CASES = {
    "unknown key": ("composable: {pool: []}", r"composable\.pool: unknown field \(did you mean pools\? allowed: "
                                               r"attach_seconds, before_preemption, idle_detach_s, nodes, pools\)"),
    "not a mapping": ("composable: [1]", r"composable: must be a mapping, got \[1\]"),
    "unknown node": ("composable: {nodes: [{name: n9, max_gpus: 8}]}", r"composable\.nodes\[0\]\.name: unknown node \"n9\""),
    "max_gpus below the node's GPUs": ("composable: {nodes: [{name: n1, max_gpus: 2}]}",
                                       r"composable\.nodes\[0\]\.max_gpus: must be at least the node's 4 GPUs, got 2"),
    "attached above the node's GPUs": ("composable: {pools: [{model: A100, free: 1}], "
                                       "nodes: [{name: n1, max_gpus: 8, attached: 5}]}",
                                       r"composable\.nodes\[0\]\.attached: must be at most the node's 4 GPUs, got 5"),
    "negative pool": ("composable: {pools: [{model: A100, free: -1}]}",
                      r"composable\.pools\[0\]\.free: must be >= 0, got -1"),
    "pool model missing": ("composable: {pools: [{free: 1}]}", r"composable\.pools\[0\]\.model: is required"),
    "duplicate pool model": ("composable: {pools: [{model: A100, free: 1}, {model: A100, free: 2}]}",
                             r"composable\.pools\[1\]\.model: duplicate model \"A100\""),
    "duplicate node": ("composable: {nodes: [{name: n1, max_gpus: 8}, {name: n1, max_gpus: 6}]}",
                       r"composable\.nodes\[1\]\.name: duplicate name \"n1\""),
    "attached GPUs of a model no pool has": ("composable: {pools: [{model: H100, free: 1}], "
                                             "nodes: [{name: n1, max_gpus: 8, attached: 1}]}",
                                             r"composable\.nodes\[0\]\.attached: attached GPUs go back to their "
                                             r"model's pool, but composable\.pools has no model \"A100\""),
    "attached GPUs without a model": ("composable: {pools: [{model: A100, free: 1}], "
                                      "nodes: [{name: n2, max_gpus: 8, attached: 1}]}",
                                      r"composable\.nodes\[0\]\.attached: must be at most the node's 0 GPUs"),
    "max_gpus above the bound": ("composable: {nodes: [{name: n1, max_gpus: 5000}]}",
                                 r"composable\.nodes\[0\]\.max_gpus: must be at most 1,024, got 5000"),
    "a pool beyond the cluster bound": ("composable: {pools: [{model: A100, free: 99999}]}",
                                        r"composable\.pools: nodes and pools must hold at most 100,000 GPUs in all, "
                                        r"got 100,003"),
    "bad before_preemption": ("composable: {before_preemption: sometimes}",
                              r"composable\.before_preemption: must be true or false, got \"sometimes\""),
    "negative attach_seconds": ("composable: {attach_seconds: -5}", r"composable\.attach_seconds: must be >= 0, got -5"),
    "expect.compositions on a node that is not composable": (
        "composable: {nodes: [{name: n1, max_gpus: 8}]}\nexpect: {compositions: {n2: 1}}",
        r"expect\.compositions\.n2: names no composable node of the scenario"),
    "expect.compositions not a whole number": (
        "composable: {nodes: [{name: n1, max_gpus: 8}]}\nexpect: {compositions: {n1: 1.5}}",
        r"expect\.compositions\.n1: must be a whole number, got 1\.5"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_section_is_one_line_naming_the_field(case, write_scenario):
    text, pattern = CASES[case]
    path = write_scenario(NODES + text + "\n")
    with pytest.raises(ScenarioError, match=pattern) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


def test_a_bad_section_exits_2_on_the_command_line(write_scenario, capsys):
    path = write_scenario(NODES + CASES["unknown node"][0] + "\n")
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpu-policy: {path}: composable.nodes[0].name") and "Traceback" not in err


def test_the_section_round_trips_and_defaults(write_scenario):
    s = load_scenario(write_scenario(NODES + "composable: {pools: [{model: A100, free: 6}], nodes: [{name: n1, max_gpus: 8}]}"))
    c = s.composable
    assert (c.attach_seconds, c.idle_detach_s, c.before_preemption, c.nodes[0].attached) == (120, 1800, True, 0)
    data = scenario_to_dict(s)
    assert data["composable"]["nodes"] == [{"name": "n1", "max_gpus": 8}]  # attached 0 is left out
    assert parse_scenario(json.loads(json.dumps(data))).composable == c
    again = parse_scenario(yaml.safe_load(yaml.safe_dump(scenario_to_dict(load_scenario(DETACH)))))
    assert again.composable == load_scenario(DETACH).composable and again.composable.nodes[0].attached == 2


def test_no_section_is_no_composition():
    s = load_scenario(SCENARIOS / "seed1-greedy-team.yaml")
    assert s.composable is None and "composable" not in scenario_to_dict(s)
    assert attachable(s, "node-1", "A100-80GB") == 0 and detachable(s, "node-1") == 0


def test_the_rules_every_part_shares():
    s = load_scenario(MODELS)
    node = {n.name: n for n in s.nodes}
    assert node_takes(node["node-3"], "A100-80GB") and not node_takes(node["node-3"], "H100")
    assert node_takes(node["node-6"], "H100") and node_takes(node["node-6"], "A100-80GB")  # no GPUs, no model: any
    assert attachable(s, "node-3", "A100-80GB") == 4  # max_gpus 8 - 4 GPUs
    assert attachable(s, "node-5", "H100") == 0  # at its max
    assert attachable(s, "node-6", "H100") == 4 and attachable(s, "node-6", "A100-80GB") == 4
    assert attachable(s, "node-1", "A100-80GB") == 0  # not composable
    assert detachable(load_scenario(DETACH), "node-3") == 2
    assert describe(Composition("n", "H100", 2)) == "attach 2 H100 to n"
    assert describe(Composition("n", "H100", -1)) == "detach 1 H100 from n"


def attach_plan(s=None):
    """compose-attach-instead-of-preempt.yaml as the planner decides it, made by hand: 4 GPUs
    attached to node-3, b-new started on them (GPUs 2-5), nothing preempted."""
    s = s or load_scenario(ATTACH)
    return composed_plan(s, [Composition("node-3", "A100-80GB", 4, "b-new waits for 4 GPUs")],
                         {"b-new": ("node-3", [2, 3, 4, 5])}, preempt=False)


def test_the_hand_made_plan_is_the_planners():
    s = load_scenario(ATTACH)
    made, decided = attach_plan(s), plan(s)
    assert [(c.node, c.model, c.change) for c in made.compositions] == \
        [(c.node, c.model, c.change) for c in decided.compositions]
    assert [(d.name, d.action, d.replicas) for d in made.jobs] == [(d.name, d.action, d.replicas) for d in decided.jobs]


def test_the_plan_carries_compositions():
    s = load_scenario(ATTACH)
    result = attach_plan(s)
    data = result.to_dict()
    assert data["compositions"] == [{"node": "node-3", "model": "A100-80GB", "change": 4,
                                     "reason": "b-new waits for 4 GPUs"}]
    assert (data["summary"]["attached"], data["summary"]["detached"]) == (4, 0)
    assert "compositions" not in plan(load_scenario(SCENARIOS / "seed1-greedy-team.yaml")).to_dict()  # omitted when empty
    assert differences(result, s.expect) == []
    table = plan_table(result)
    assert "node-3  A100-80GB  +4    b-new waits for 4 GPUs" in table and "of 22 (18 + 4 attached - 0 detached)" in table
    assert "node-3  bb       -> bbBBBB  (4 attached)" in layout_before_after(s, result)


def test_check_reports_compositions_that_differ():
    s = load_scenario(ATTACH)
    two = composed_plan(s, [Composition("node-3", "A100-80GB", 2), Composition("node-4", "A100-80GB", 1)])
    assert differences(two, {"compositions": {"node-3": 4, "node-4": 1}, "summary": {"attached": 4, "detached": 0}}) \
        == ["summary.attached: expected 4, got 3", "compositions.node-3: expected +4, got +2"]
    assert differences(two, {"compositions": {"node-4": 0}}) == ["compositions.node-4: expected +0, got +1"]


def test_applying_attaches_and_detaches():
    s = load_scenario(ATTACH)
    after = apply_plan(s, attach_plan(s))
    node3 = after.node("node-3")
    assert (node3.gpus, after.composable.node("node-3").attached, after.composable.pool("A100-80GB").free) == (6, 4, 2)
    assert next(j for j in after.jobs if j.name == "b-new").gpu_indices == [[2, 3, 4, 5]]
    again = parse_scenario(scenario_to_dict(after))  # a valid scenario, as --apply-to writes it
    assert again.composable == after.composable
    d = load_scenario(DETACH)
    gone = apply_plan(d, composed_plan(d, [Composition("node-3", "A100-80GB", -2, "idle for 60 min")]))
    assert (gone.node("node-3").gpus, gone.composable.node("node-3").attached,
            gone.composable.pool("A100-80GB").free) == (6, 0, 6)


def test_an_empty_node_takes_the_model_attached():
    s = load_scenario(MODELS)
    after = apply_plan(s, plan(s))
    assert (after.node("node-6").gpus, after.node("node-6").gpu_model, after.composable.pool("H100").free) == (4, "H100", 0)


@pytest.mark.parametrize("composition,starts,message", [
    (Composition("node-1", "A100-80GB", 2), {}, "not a composable node"),
    (Composition("node-3", "H100", 2), {}, "not a composable node with that pool"),
    (Composition("node-3", "A100-80GB", 7), {}, "attaches 7 A100-80GB to node-3, which can take 6"),
    (Composition("node-4", "A100-80GB", 3), {}, "attaches 3 A100-80GB to node-4, which can take 2"),
    (Composition("node-3", "A100-80GB", -1), {}, "detaches 1 GPUs from node-3, which has 0 attached"),
    (Composition("node-3", "A100-80GB", 1), {"b-new": ("node-3", [2, 3, 4, 5])}, "runs a job on GPU 3 of node-3"),
])
def test_a_plan_the_scenario_cannot_carry_out_is_a_bug(composition, starts, message):
    s = load_scenario(ATTACH)
    with pytest.raises(ValueError, match=message):
        apply_plan(s, composed_plan(s, [composition], starts))


def test_a_detach_never_takes_a_gpu_in_use():
    d = load_scenario(DETACH)
    busy = composed_plan(d, [Composition("node-3", "A100-80GB", -2)], {})
    busy.jobs = [j if j.name != "b-1" else type(j)(j.name, j.queue, "keep", [type(j.replicas[0])("node-3", 6, [2, 3, 4, 5, 6, 7])])
                 for j in busy.jobs]
    with pytest.raises(ValueError, match="detaches GPU 6 of node-3, which a job holds after the plan"):
        apply_plan(d, busy)


def test_the_embedded_cluster_carries_compositions_out(tmp_path, monkeypatch):
    s = load_scenario(ATTACH)
    cluster = ScenarioCluster(ATTACH, apply_to=tmp_path / "after.yaml")
    monkeypatch.setattr("gpu_policy.actions.cycle.plan", lambda *a, **k: attach_plan(s))
    result, outcomes = apply_plan_once(cluster, execute=False)
    assert [(o.job, o.action, o.result) for o in outcomes] == [("node-3", "attach", "dry run")]
    assert outcomes[0].detail == "attach 4 A100-80GB to node-3: b-new waits for 4 GPUs"
    assert not (tmp_path / "after.yaml").exists()
    result, outcomes = apply_plan_once(cluster, execute=True)
    assert [(o.action, o.result) for o in outcomes] == [("attach", "done")]
    written = load_scenario(tmp_path / "after.yaml")
    assert (written.node("node-3").gpus, written.composable.node("node-3").attached) == (6, 4)
    assert cluster.attach_waiter(result, cluster.observe(), Job("x", "team-b", 1), outcomes) is None


def test_a_step_on_attached_gpus_starts_at_once_on_the_embedded_cluster(monkeypatch):
    """The embedded cluster attaches at once: a step whose plan attaches GPUs for it may start."""
    s = load_scenario(ATTACH)
    step = Job("b-step", "team-b", 4, submitted_at=100)
    with_step = type(s)(s.nodes, s.queues, [j for j in s.jobs if j.name != "b-new"] + [step], composable=s.composable,
                        source=s.source)
    monkeypatch.setattr("gpu_policy.actions.step.plan", lambda scenario, *a, **k: composed_plan(
        scenario, [Composition("node-3", "A100-80GB", 4)], {"b-step": ("node-3", [2, 3, 4, 5])}, preempt=False))
    cluster = ScenarioCluster(with_step)
    decision = wait_for_step(cluster, step, execute=True)
    assert decision.can_start and decision.nodes == ["node-3"]
    assert [(o.action, o.result) for o in decision.outcomes] == [("attach", "done"), ("reserve", "done")]
    assert cluster.scenario.node("node-3").gpus == 6


def test_uses_new_gpus():
    d = attach_plan().job("b-new")
    assert uses_new_gpus(d, {"node-3": 2}) == {"node-3"}
    assert uses_new_gpus(d, {"node-3": 6}) == set()
    assert uses_new_gpus(d, {}) == set()


EXAMPLES = SCENARIOS.parent.parent / "gpu_policy" / "examples"


@pytest.mark.parametrize("name", ["compose-pending-pod", "compose-idle-gpu"])
def test_the_demo_examples_pass_check(name, capsys):
    assert main(["plan", str(EXAMPLES / f"{name}.yaml"), "--check"]) == 0, capsys.readouterr().err


def test_the_demo_shows_attach_and_detach():
    """The talk's demo with the planner's decisions: a GPU attached for the pending pod, which
    starts on it; then the idle GPU detached (the demo reads simulated DCGM telemetry)."""
    from gpu_policy.presentation.demo import composition_demo

    out = composition_demo()
    assert "== Composition, part 1" in out and "(compose-pending-pod.yaml)" in out
    assert "node-2  b    -> bB  (1 attached)" in out
    assert "attach 1 A100-80GB to node-2: pod-b (1 GPU) starts on it" in out
    assert "pod-b: starts when 1 A100-80GB is attached to node-2, about 120 s" in out
    assert "after: node-2 has 2 GPUs (1 attached); the pool has 1 A100-80GB" in out
    assert "== Composition, part 2" in out and "(compose-idle-gpu.yaml)" in out
    assert "node-2  b.   -> b  (1 detached)" in out
    assert "detach 1 A100-80GB from node-2: idle for 60 min (idle_detach_s: 30 min); no waiting job can use it" in out
    assert "after: node-2 has 1 GPU (0 attached); the pool has 2 A100-80GB" in out


def test_the_summary_counts_the_gpus_the_compositions_leave():
    from gpu_policy.presentation.render import plan_table

    attach = plan_table(plan(load_scenario(SCENARIOS / "compose-attach-instead-of-preempt.yaml")))
    assert "GPUs allocated 18 -> 22 of 22 (18 + 4 attached - 0 detached)" in attach
    settled = plan_table(plan(load_scenario(SCENARIOS / "compose-detach-not-yet.yaml")))
    assert "GPUs allocated 14 -> 14 of 16;" in settled
