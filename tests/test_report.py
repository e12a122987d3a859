"""The per-team report: a table always, a plot where matplotlib is installed."""

import importlib.util

from gpu_policy import load_scenario, plan
from gpu_policy.presentation.report import write_report
from tests.conftest import SCENARIOS


def test_report(tmp_path):
    paths = write_report(plan(load_scenario(SCENARIOS / "seed1-greedy-team.yaml")), tmp_path / "r", "seed 1")
    table = paths[0].read_text()
    assert paths[0].name == "report.md" and "team-a  20        -      20" in table and "2 preemptions" in table
    if importlib.util.find_spec("matplotlib"):
        assert paths[1].name == "fair_share.png" and paths[1].read_bytes()[:4] == b"\x89PNG"
    else:
        assert len(paths) == 1
