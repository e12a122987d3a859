"""The fuzz test of the scenario loader and the CLI (tests/inputs/fuzz_worker.py), in a
child process under a memory limit. About a minute on two cores; the example count
(tests/fuzz_profiles.py: a quarter in CI), not a deadline, bounds it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz_profiles import examples

HERE = Path(__file__).parent
MEMORY_MIB, CPU_S_PER_EXAMPLE, EXAMPLES = 1536, 30, examples(1500)


def test_fuzzed_inputs_plan_or_fail_in_one_line(tmp_path):
    pytest.importorskip("hypothesis", reason="hypothesis is in the [dev] extra: pip install -e '.[dev]'")
    done = subprocess.run([sys.executable, str(HERE / "fuzz_worker.py"), str(tmp_path), str(MEMORY_MIB),
                           str(CPU_S_PER_EXAMPLE), str(EXAMPLES)], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    print(done.stdout)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert done.stdout.count("examples passed") == 3
