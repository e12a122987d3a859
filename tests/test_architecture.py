"""The import graph keeps observe -> decide -> act (docs/contributing.md, "The layout").

Every import of gpu_policy's own modules is read from the source, those inside functions
too, so a lazy import cannot hide what a module needs. The test fails on an import that
runs against the layers, on any cycle of modules, and on an import that only type-checking
sees."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpu_policy"

#: The layers, bottom first: each module belongs to the first whose prefix it starts with
#: (the longest prefix wins), and may import its own layer and those named beside it.
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # layer: (module prefixes, layers it may import)
    "base": (("gpu_policy._version", "gpu_policy.errors", "gpu_policy.extras", "gpu_policy.backoff"), ()),
    "model": (("gpu_policy.model",), ("base",)),
    "transport": (("gpu_policy.kubernetes.transport", "gpu_policy.kubernetes.names",
                   "gpu_policy.kubernetes.settings", "gpu_policy.kubernetes.clocks"), ("base", "model")),
    "observe": (("gpu_policy.telemetry", "gpu_policy.kubernetes.read"), ("base", "model", "transport")),
    "decide": (("gpu_policy.planner", "gpu_policy.packing"), ("base", "model")),
    "act": (("gpu_policy.kubernetes.write",), ("base", "model", "transport", "observe")),
    "train": (("gpu_policy.checkpoint",), ("base", "model", "transport", "observe", "act")),
    "backends": (("gpu_policy.kubernetes", "gpu_policy.cluster"), ("base", "model", "transport", "observe", "act")),
    "run": (("gpu_policy.actions", "gpu_policy.controller"),
            ("base", "model", "transport", "observe", "decide", "act", "train", "backends")),
    "present": (("gpu_policy.presentation",),
                ("base", "model", "transport", "observe", "decide", "act", "train", "backends", "run")),
    "simulate": (("gpu_policy.sim",), ("base", "model", "decide", "present")),
    "entry": (("gpu_policy.cli", "gpu_policy.kfp", "gpu_policy.airflow", "gpu_policy.__main__", "gpu_policy"),
              ("base", "model", "transport", "observe", "decide", "act", "train", "backends", "run", "present",
               "simulate")),
}

#: Inside the planner: its core imports no rule, the rules import the core, and what puts a
#: plan together imports both.
PLANNER_LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "settings": (("gpu_policy.planner.config", "gpu_policy.planner.gc_tuning"), ()),
    "core": (("gpu_policy.planner.core",), ("settings",)),
    "rules": (("gpu_policy.planner.rules",), ("settings", "core")),
    "planner": (("gpu_policy.planner",), ("settings", "core", "rules")),
}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """The gpu_policy modules `name` imports anywhere in its file, with the line."""
    found = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            # `from package import module` names the module; `from module import name` the module
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("gpu_policy") and target != name:
                found.append((target, node.lineno))
    return found


def layer_of(name: str, layers: dict) -> str | None:
    best = None
    for layer, (prefixes, _) in layers.items():
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (layer, prefix)
    return best and best[0]


def graph() -> dict[str, list[tuple[str, int]]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def against(layers: dict, edges: dict[str, list[tuple[str, int]]], inside: str = "") -> list[str]:
    """Imports from a module of one layer into a layer it may not import."""
    wrong = []
    for name, targets in edges.items():
        if not name.startswith(inside):
            continue
        mine = layer_of(name, layers)
        for target, line in targets:
            theirs = layer_of(target, layers)
            if inside and not target.startswith(inside):
                continue
            if mine is None or theirs is None:
                wrong.append(f"{name}:{line} -> {target}: a module of no layer")
            elif theirs != mine and theirs not in layers[mine][1]:
                wrong.append(f"{name}:{line} ({mine}) -> {target} ({theirs})")
    return wrong


def cycles(edges: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w, _ in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package_edges(edges: dict[str, list[tuple[str, int]]]) -> dict[str, list[tuple[str, int]]]:
    """The graph between the packages directly under gpu_policy (and its loose modules)."""
    out: dict[str, set] = defaultdict(set)
    for name, targets in edges.items():
        for target, line in targets:
            a, b = ".".join(name.split(".")[:2]), ".".join(target.split(".")[:2])
            if a != b:
                out[a].add((b, line))
    return {a: sorted(b) for a, b in out.items()}


def test_no_import_runs_against_the_layers():
    assert against(LAYERS, graph()) == []


def test_no_import_runs_against_the_planners_layers():
    assert against(PLANNER_LAYERS, graph(), inside="gpu_policy.planner") == []


def test_no_cycle_of_packages_or_modules():
    edges = graph()
    assert cycles(package_edges(edges)) == []
    assert cycles(edges) == []


def test_no_import_hides_behind_type_checking():
    hidden = [str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py") if "TYPE_CHECKING" in path.read_text()]
    assert hidden == []


def test_every_module_has_a_layer():
    assert [name for name in modules() if layer_of(name, LAYERS) is None] == []


def test_the_check_sees_imports_inside_functions():
    """A lazy import counts: the graph of a module that imports inside a function has the edge."""
    known = {"gpu_policy.a": Path("a.py"), "gpu_policy.b": Path("b.py")}
    source = "def f():\n    from gpu_policy.b import x\n"
    path = ROOT / "build" / "lazy_probe.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    assert imports("gpu_policy.a", path, known) == [("gpu_policy.b", 2)]
    assert cycles({"a": [("b", 1)], "b": [("a", 1)]}) == [["a", "b"]]
    assert against(LAYERS, {"gpu_policy.model.x": [("gpu_policy.planner.y", 3)]}) == [
        "gpu_policy.model.x:3 (model) -> gpu_policy.planner.y (decide)"]
