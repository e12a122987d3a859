"""Every scenario file passes `gpu-policy plan --check`."""

import json

import pytest

from tests.conftest import scenario_files
from gpu_policy import load_scenario, plan
from gpu_policy.cli import main


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_check_passes(path, capsys):
    assert main(["plan", str(path), "--check"]) == 0, capsys.readouterr().err


def test_check_reports_a_mismatch(write_scenario, capsys):
    path = write_scenario("""
nodes: [{name: n, gpus: 2}]
queues: [{name: q}]
jobs: [{name: j, queue: q, gpus: 1}]
expect: {jobs: {j: wait}, summary: {starts: 0}}
""")
    assert main(["plan", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "jobs.j: expected wait, got start" in err
    assert "summary.starts: expected 0, got 1" in err


def test_every_job_appears_exactly_once():
    for path in scenario_files():
        s = load_scenario(path)
        assert sorted(j.name for j in plan(s).jobs) == sorted(j.name for j in s.jobs)


def test_formats_parse(capsys):
    path = str(scenario_files()[0])
    assert main(["plan", path, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "Plan" and data["solver"]["backend"] == "HiGHS"  # the default solver
    assert main(["plan", path, "--format", "yaml"]) == 0
    assert "kind: Plan" in capsys.readouterr().out
    assert main(["plan", path]) == 0
    table = capsys.readouterr().out
    assert "FAIR SHARE" in table and "summary:" in table


def test_wait_reasons_are_words():
    s = load_scenario(next(p for p in scenario_files() if p.name == "never-fits.yaml"))
    reasons = {j.name: j.reason for j in plan(s).jobs}
    assert reasons["too-many-gpus"] == "can never fit: needs 8 GPUs on one node; the largest node has 4 healthy"
    assert "64 CPUs" in reasons["too-many-cpus"]
    assert "512 GiB" in reasons["too-much-memory"]
    gm = load_scenario(next(p for p in scenario_files() if p.name == "gpu-model.yaml"))
    assert plan(gm).job("v100-only").reason == "can never fit: no node has GPU model V100"


def test_demo_shows_every_seed(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for seed in ("seed1-greedy-team", "seed2-fragmentation", "seed3-idle-borrow", "seed3b-owner-returns"):
        assert seed in out
    assert "BBBBBBBBBB" in out  # team-b starts on the node freed by reclaim
    assert "== Composition, part 1" in out and "== Composition, part 2" in out
    assert "no step lost, none repeated" in out


def test_cbc_gives_the_same_decisions():
    for path in scenario_files():
        s = load_scenario(path)
        from gpu_policy import PlannerConfig

        highs, cbc = plan(s), plan(s, PlannerConfig(solver="cbc"))
        assert {j.name: j.action for j in cbc.jobs} == {j.name: j.action for j in highs.jobs}, path.name
        assert cbc.changes_by_node() == highs.changes_by_node(), path.name
