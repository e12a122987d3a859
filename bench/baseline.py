"""Run a bench script against an older gpu-policy taken from git history.

`--baseline COMMIT` in the bench scripts extracts that commit's `gpu_policy/` into a
temporary folder and runs the same script there in a subprocess (its PYTHONPATH
puts the old package first), so old and new figures come from the same run. `run_here`
runs it on this checkout's package the same way, for old and new taking turns.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def revision(rev: str) -> str:
    """`--baseline`'s type: a revision this repository has, checked before anything is
    measured (argparse then says what is wrong in one line and exits with 2)."""
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           stdout=subprocess.DEVNULL, check=False)
    if found.returncode != 0:
        raise argparse.ArgumentTypeError(f"{rev!r} is not a commit of this repository")
    return rev


def run_at_commit(commit: str, script: str, args: list[str]) -> list[dict]:
    """Run `script` with `args --json` on `commit`'s package; its JSON lines, parsed."""
    with tempfile.TemporaryDirectory(prefix="gpu-policy-baseline-") as tmp:
        archive = Path(tmp) / "old.tar"
        with archive.open("wb") as out:
            subprocess.run(["git", "-C", str(ROOT), "archive", commit, "gpu_policy"], stdout=out, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        return _run(script, args, [tmp, str(ROOT)])


def run_here(script: str, args: list[str]) -> list[dict]:
    """Run `script` with `args --json` in a process of its own on this checkout's package."""
    return _run(script, args, [str(ROOT)])


def _run(script: str, args: list[str], path: list[str]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--json"], env=env,
                          stdout=subprocess.PIPE, check=True, text=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
