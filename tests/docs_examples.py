"""Every ```python block of the docs, found and run (docs/contributing.md, "Examples in the docs").

A block runs in the environment its imports need: ``kfp`` or ``gpu_policy.kfp`` in
.venv-kfp, where every pipeline it defines is also compiled; ``transformers``, ``lightning``
or their gpu-policy callbacks in .venv-trainers; ``airflow`` or ``gpu_policy.airflow`` in .venv-airflow, where it is imported as a DAG file by Airflow's
DagBag, then run as a script where it has a ``__main__`` part (``dag.test()``), with
``AIRFLOW__CORE__DAGS_FOLDER`` set to its folder as the docs say; anything else in the core .venv. Each runs in a fresh subprocess whose working
folder mirrors the checkout (so ``tests/scenarios/...`` resolves) but writes land in a
temporary folder. A block the line ``<!-- docs-example: illustrative: REASON -->`` directly
precedes is not run; the reason is required.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "components").glob("*/README.md")))
ENVIRONMENTS = {"kfp": ("kfp", "gpu_policy.kfp"), "airflow": ("airflow", "gpu_policy.airflow"),
                "trainers": ("transformers", "lightning", "gpu_policy.checkpoint.hf", "gpu_policy.checkpoint.lightning")}
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")
_ILLUSTRATIVE = re.compile(r"^\s*<!--\s*docs-example:\s*illustrative:\s*(?P<reason>.*?)\s*-->\s*$")
_SKIPPED_ENTRIES = {".git", "build", "dist"}
RUNNER = """
import runpy, sys
path, environment = sys.argv[1], sys.argv[2]
if environment == "airflow":
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=path, safe_mode=False)
    assert not bag.import_errors, "\\n".join(bag.import_errors.values())
    print("DAGs imported:", sorted(bag.dag_ids))
    if "__main__" not in open(path).read():
        raise SystemExit(0)
namespace = runpy.run_path(path, run_name="__main__")
if environment == "kfp":
    from kfp import compiler
    from kfp.dsl.graph_component import GraphComponent
    for name, value in namespace.items():
        if isinstance(value, GraphComponent):
            compiler.Compiler().compile(value, f"{name}.yaml")
            print("compiled:", name)
"""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    """The line of the opening fence, counted from 1."""
    source: str
    illustrative: str | None
    """Why the block is not run, when it is marked illustrative."""

    @property
    def id(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}"

    @property
    def environment(self) -> str:
        """`core`, `kfp`, `airflow` or `trainers`: where the block's imports can be met."""
        modules = set()
        for node in ast.walk(ast.parse(self.source, self.id)):
            if isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module)
        needs = {env for env, prefixes in ENVIRONMENTS.items()
                 if any(m == p or m.startswith(f"{p}.") for m in modules for p in prefixes)}
        if len(needs) > 1:
            raise AssertionError(f"{self.id}: imports from {sorted(needs)}, which no one environment has")
        return needs.pop() if needs else "core"


def blocks(paths=DOCS) -> list[Block]:
    """The ```python (or ```py) blocks of `paths`, in order."""
    found = []
    for path in paths:
        lines = path.read_text().splitlines()
        k = 0
        while k < len(lines):
            fence = _FENCE.match(lines[k])
            if not fence:
                k += 1
                continue
            indent, info = fence["indent"], fence["info"].strip()
            end = next((j for j in range(k + 1, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                raise AssertionError(f"{path}:{k + 1}: a code block that never closes")
            if info.split(" ")[0] in {"python", "py", "python3"}:
                body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[k + 1:end])
                marker = _ILLUSTRATIVE.match(lines[k - 1]) if k else None
                found.append(Block(path, k + 1, body + "\n", marker["reason"] if marker else None))
            k = end + 1
    return found


def checkout_view(folder: Path) -> Path:
    """A folder whose entries link to the checkout's: paths resolve as in the checkout, new files stay here."""
    work = folder / "checkout"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in _SKIPPED_ENTRIES and not entry.name.startswith(".venv"):
            (work / entry.name).symlink_to(entry)
    return work


def run(block: Block, folder: Path, env: dict[str, str] | None = None,
        timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run `block` in a subprocess of this interpreter, in its environment's way."""
    work = checkout_view(folder)
    script = work / f"docs_example_{block.environment}.py"
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if block.environment == "airflow":  # a DAG file in a DAGs folder of its own, as dag.test() needs
        (folder / "dags").mkdir()
        script = folder / "dags" / script.name
        environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(script.parent)
    script.write_text(block.source)
    environ.update({"MPLBACKEND": "Agg", **(env or {})})
    return subprocess.run([sys.executable, "-c", RUNNER, str(script), block.environment], cwd=work, env=environ,
                          capture_output=True, text=True, timeout=timeout_s)


def described(done: subprocess.CompletedProcess, block: Block) -> str:
    return f"{block.id} failed (exit {done.returncode}):\n{block.source}\n--- output ---\n{done.stdout[-3000:]}{done.stderr[-4000:]}"
