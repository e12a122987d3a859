"""Shared fixtures: the scenario files, a helper to write a scenario from text, the release build."""

import fcntl
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.fixture(scope="session")
def dist_dir(tmp_path_factory) -> Path:
    """The wheel and sdist as `make dist` builds and checks them (built once per session).
    One build at a time: `make test` runs the suites at once, and each build writes the
    checkout's gpu_policy.egg-info."""
    out = tmp_path_factory.mktemp("dist")
    (ROOT / "build").mkdir(exist_ok=True)
    with open(ROOT / "build" / "make-dist.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(["make", "-s", "-C", str(ROOT), "dist", f"DIST={out}"], capture_output=True, text=True,
                              timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("PASSED") == 2, done.stdout[-2000:]  # twine check, wheel and sdist
    return out
