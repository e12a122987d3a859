"""Applying a plan and planning again with no new input changes nothing."""

import pytest

from tests.conftest import scenario_files
from gpu_policy import load_scenario, plan
from gpu_policy.apply import apply_plan
from gpu_policy.cli import main


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_five_rounds_settle(path):
    s = load_scenario(path)
    s = apply_plan(s, plan(s))
    for round_ in range(5):
        result = plan(s)
        acted = [(j.name, j.action) for j in result.jobs if j.action not in ("keep", "wait")]
        assert acted == [], f"round {round_ + 2}: {acted}"
        s = apply_plan(s, result)


def test_apply_to_writes_a_loadable_scenario(tmp_path):
    seed = next(p for p in scenario_files() if p.name == "seed1-greedy-team.yaml")
    out = tmp_path / "after.yaml"
    assert main(["plan", str(seed), "--apply-to", str(out)]) == 0
    after = load_scenario(out)
    assert after.expect is None
    running = {j.name for j in after.jobs if j.running}
    assert {"b-3", "b-4"} <= running and not {"a-5", "a-6"} & running
    again = plan(after)
    assert again.summary["starts"] == again.summary["preemptions"] == 0
