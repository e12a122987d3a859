"""Issue 17's reproducers (tests/inputs/cases.py): each ends in exit 0 with a plan, or
exit 2 with one clean line naming the file or option and the field, within bounds.

All cases run in one child process under RLIMIT_AS (memory) and a CPU-time alarm per
case, so a case that would hang or grow without bound fails here instead of hanging
the suite; the bounds are generous because the machine may be loaded. Wall-clock time
and peak memory per case are measured by bench/bad_inputs.py.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_policy.errors import MESSAGE_LIMIT
from tests.inputs.cases import build_cases

HERE = Path(__file__).parent
MEMORY_MIB, CPU_S_PER_CASE = 1536, 60


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reproducers")
    done = subprocess.run([sys.executable, str(HERE / "run_cases.py"), str(folder / "cases"), str(MEMORY_MIB),
                           str(CPU_S_PER_CASE)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}
    return found, build_cases(folder / "cases")


NAMES = sorted(build_cases(Path(os.environ.get("TMPDIR", "/tmp")) / "gpu-policy-case-names"))


@pytest.mark.parametrize("name", NAMES)
def test_reproducer(name, results):
    found, cases = results
    result, case = found[name], cases[name]
    assert result["failure"] is None, f"{name}: {result['failure']}"
    if case.error is None:
        assert result["status"] == 0, result["stderr"]
        answer = json.loads(result["stdout"])
        assert answer.get("kind") == "Plan" or "policies" in answer
        return
    assert result["status"] == 2, (result["status"], result["stderr"][-2000:])
    assert result["stdout"] == "" or case.argv[0] == "plan"  # --apply-to writes after the plan is printed
    err = result["stderr"]
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err, err[-2000:]
    line = err.rstrip("\n")
    assert line.startswith("gpu-policy: ") and len(line) <= MESSAGE_LIMIT and line.isprintable(), line
    assert re.search(case.error, line), (case.error, line)
