"""The core imports and plans with every optional library blocked (STYLE rule 13)."""

import subprocess
import sys
from pathlib import Path

BLOCKER = """
import importlib.abc, sys
BLOCKED = {"kfp", "airflow", "kubernetes", "torch", "highspy"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked for the test: {name}")
sys.meta_path.insert(0, Block())
import pulp
assert not pulp.HiGHS().available()
import gpu_policy, gpu_policy.checkpoint
s = gpu_policy.load_scenario(sys.argv[1])
print(gpu_policy.plan(s).summary["preemptions"])
try:
    import kfp
except ImportError as e:
    print("kfp blocked:", e)
"""


def test_core_without_optional_libraries():
    seed = Path(__file__).parent / "scenarios" / "seed1-greedy-team.yaml"
    out = subprocess.run([sys.executable, "-c", BLOCKER, str(seed)], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["2", "kfp blocked: blocked for the test: kfp"]


def test_integration_without_its_framework_names_the_extra():
    import importlib.util

    import pytest

    if importlib.util.find_spec("kfp") is not None:
        pytest.skip("kfp is installed in this environment")
    with pytest.raises(ImportError, match=r"gpu_policy.kfp needs Kubeflow Pipelines: install gpu-policy with its \[kfp\] extra"):
        import gpu_policy.kfp  # noqa: F401
