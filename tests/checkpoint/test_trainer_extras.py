"""Without their libraries, the trainer callbacks fail with one line naming the extra (STYLE rule 13)."""

import subprocess
import sys
from pathlib import Path

BLOCKED = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"transformers", "lightning"}:
            raise ImportError(f"blocked for the test: {name}")
sys.meta_path.insert(0, Block())
import gpu_policy.checkpoint
for module in ("gpu_policy.checkpoint.hf", "gpu_policy.checkpoint.lightning"):
    try:
        __import__(module)
    except ImportError as e:
        print(e)
"""


def test_each_callback_names_its_extra():
    done = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gpu_policy.checkpoint.hf needs transformers: install gpu-policy with its [hf] extra, "
        "from a checkout or its wheel (docs/install.md)",
        "gpu_policy.checkpoint.lightning needs lightning: install gpu-policy with its [lightning] extra, "
        "from a checkout or its wheel (docs/install.md)"]
