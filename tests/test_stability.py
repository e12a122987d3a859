"""Applying a plan and planning again with no new input changes nothing."""

import pytest

from tests.conftest import SCENARIOS, scenario_files
from tests.planner.composable_clusters import composable_scenario
from tests.planner.random_clusters import random_scenario, rich_scenario
from gpu_policy import PlannerConfig, load_scenario, parse_scenario, plan
from gpu_policy.model.apply import apply_plan
from gpu_policy.cli import main
from gpu_policy.actions.cycle import plan_with_telemetry


#: A budget no loaded machine runs out of: a plan that fell back (its status says so) is a
#: different plan, and these tests are about what plans decide, not how fast.
GENEROUS = PlannerConfig(time_limit_s=600.0)


def settled_plan(s):
    """`plan` with a generous budget; a plan that fell back fails here, by its status."""
    return decided(plan(s, GENEROUS))


def settled_plan_with_telemetry(s):
    return decided(plan_with_telemetry(s, config=GENEROUS))


def decided(result):
    assert result.solver.status in ("Optimal", "Nothing to decide"), result.solver.status
    return result


def acts(result) -> list:
    """What a plan changes: starts, preemptions, moves, GPUs attached or detached."""
    return [(j.name, j.action) for j in result.jobs if j.action not in ("keep", "wait")] + \
        [(c.node, c.change) for c in result.compositions]


def at_fixed_point(s, result, after, decide) -> bool:
    """Whether applying `result` left scenario `s` as it was, and planning `s` again gives
    the same plan: then every later round would plan this same input to this same plan,
    so the rounds stop here instead of repeating it."""
    return after == s and same_plan(decide(s), result)


def same_plan(a, b) -> bool:
    return a.to_dict(with_timing=False) == b.to_dict(with_timing=False)


def assert_settles(s, rounds: int, decide=settled_plan) -> None:
    """After the first plan is applied, `rounds` more plans start, preempt, move, attach
    and detach nothing."""
    s = apply_plan(s, decide(s))
    for round_ in range(rounds):
        result = decide(s)
        assert acts(result) == [], f"round {round_ + 2}: {acts(result)}"
        after = apply_plan(s, result)
        if at_fixed_point(s, result, after, decide):
            return
        s = after


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_five_rounds_settle(path):
    assert_settles(load_scenario(path), 5)


def test_apply_to_writes_a_loadable_scenario(tmp_path):
    seed = next(p for p in scenario_files() if p.name == "seed1-greedy-team.yaml")
    out = tmp_path / "after.yaml"
    assert main(["plan", str(seed), "--apply-to", str(out)]) == 0
    after = load_scenario(out)
    assert after.expect is None
    running = {j.name for j in after.jobs if j.running}
    assert {"b-3", "b-4"} <= running and not {"a-5", "a-6"} & running
    again = settled_plan(after)
    assert again.summary["starts"] == again.summary["preemptions"] == 0


@pytest.mark.parametrize("seed", range(40))
def test_random_clusters_settle(seed):
    assert_settles(parse_scenario(random_scenario(seed)), 4)


@pytest.mark.parametrize("seed", range(200))
def test_rich_random_clusters_settle(seed):
    """Departments, queue tiers and limits, gangs, fractions, priorities, non-preemptible
    jobs and GPU models together: rounds 2-5 of plan-and-apply act no more."""
    assert_settles(parse_scenario(rich_scenario(seed)), 4)


COMPOSABLE = sorted(SCENARIOS.glob("compose-*.yaml")) + sorted(
    (SCENARIOS.parent.parent / "gpu_policy" / "examples").glob("compose-*.yaml"))


@pytest.mark.parametrize("path", COMPOSABLE, ids=lambda p: p.stem)
def test_composition_settles_with_telemetry(path):
    """With (simulated) DCGM telemetry, as `gpu-policy plan` plans a scenario file: GPUs
    attached for waiting work stay, idle ones go back once, and then nothing changes."""
    assert_settles(load_scenario(path), 5, settled_plan_with_telemetry)


@pytest.mark.parametrize("seed", range(100))
def test_composable_clusters_settle_without_ping_pong(seed):
    """Random composable clusters, planned with simulated telemetry for five rounds: a node
    never gains GPUs in one round and loses them in another (no attach/detach ping-pong),
    and rounds 2-5 act no more."""
    s = parse_scenario(composable_scenario(seed))
    changes: dict[str, set[bool]] = {}
    acted = []
    for round_ in range(5):
        result = settled_plan_with_telemetry(s)
        for c in result.compositions:
            changes.setdefault(c.node, set()).add(c.change > 0)
        if round_ and acts(result):
            acted.append((round_ + 1, acts(result)))
        after = apply_plan(s, result)
        if at_fixed_point(s, result, after, plan_with_telemetry):
            break
        s = after
    assert all(len(signs) == 1 for signs in changes.values()), f"ping-pong: {changes}"
    assert acted == TWO_ROUNDS.get(seed, [])


#: Clusters that settle in two rounds, each with what the second round does. Seed 65: q0
#: (fair share 0) could swap its low-priority job for a higher-priority one inside the queue,
#: ending lower, but in the first plan q1 may still take GPUs from q0, and a swap never rides
#: on GPUs another queue may take (rules.inside.inside_victims); once q1 holds its share, the
#: second plan makes the swap, and nothing after.
TWO_ROUNDS = {65: [(2, [("j2", "start"), ("j4", "preempt")])]}


def test_applying_a_plan_keeps_the_policy_and_the_namespaces():
    """Planning the applied scenario again plans by the same rules: a policy (usage, reclaim
    wait) or namespaces lost on the way would change the next plan, not the cluster."""
    s = parse_scenario({"nodes": [{"name": "n", "gpus": 4}], "namespaces": [{"name": "ml", "labels": {"team": "a"}}],
                        "policy": {"usage_half_life_s": 3600, "reclaim_wait_s": 60},
                        "queues": [{"name": "a", "usage_gpu_h": 3, "namespace_selector": {"matchLabels": {"team": "a"}}}],
                        "jobs": [{"name": "ml/j", "queue": "a", "gpus": 2}]})
    after = apply_plan(s, settled_plan(s))
    assert after.policy == s.policy and after.namespaces == s.namespaces and after.queues == s.queues
