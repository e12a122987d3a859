"""`make test` (the README's second command): every suite runs and is reported, and any
failure fails make, pytest's exit 5 (no tests collected) included (issue 28). The suites
are replaced by commands with known exit statuses, so this runs in a second."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make_test(tmp_path, **statuses):
    """`make test` with each suite a command exiting with the status given; the venvs' marks
    are made newer than setup.py and the locks, so make builds nothing."""
    args = []
    for variable in ("VENV", "KFP_VENV", "AIRFLOW_VENV", "TRAINERS_VENV"):
        folder = tmp_path / variable
        folder.mkdir()
        (folder / ".installed").touch()
        args.append(f"{variable}={folder}")
    for suite, status in statuses.items():
        args.append(f"SUITE_{suite}={sys.executable} -c 'print(\"{suite} ran\"); raise SystemExit({status})'")
    args.append(f"SUITES={' '.join(statuses)}")  # these suites only: any other would run for real
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "test", f"REPORTS={tmp_path / 'reports'}",
                           *args], capture_output=True, text=True, timeout=120)


def test_every_suite_runs_and_any_failure_fails_make(tmp_path):
    done = make_test(tmp_path, core=5, kfp=0, airflow=1)
    assert done.returncode != 0, done.stdout
    for suite in ("core", "kfp", "airflow"):
        assert f"{suite} ran" in done.stdout
    summary = (tmp_path / "reports" / "test-summary.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in summary] == ["core", "kfp", "airflow"]
    assert summary[0].endswith("(exit 5)") and summary[2].endswith("(exit 1)")
    assert "failed: core airflow" in done.stdout


def test_all_suites_passing_pass(tmp_path):
    done = make_test(tmp_path, core=0, kfp=0, airflow=0)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed" not in done.stdout
