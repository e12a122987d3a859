"""Shared fixtures: the scenario files and a helper to write a scenario from text."""

from pathlib import Path

import pytest

SCENARIOS = Path(__file__).parent / "scenarios"


def scenario_files() -> list[Path]:
    files = sorted(SCENARIOS.glob("*.yaml"))
    assert len(files) >= 26, "the scenario folder lost files"
    return files


@pytest.fixture
def write_scenario(tmp_path):
    def write(text: str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
