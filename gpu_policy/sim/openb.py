"""Loaders for the Alibaba openb GPU trace (cluster-trace-gpu-v2023).

Nodes: sn, cpu_milli, memory_mib, gpu, model. Pods: name, cpu_milli, memory_mib,
num_gpu, gpu_milli (the share of one GPU in thousandths when num_gpu is 1),
gpu_spec (allowed models, '|'-separated, empty for any) and columns the simulator
does not read. A bad row is a `TraceError` naming the file, row and field.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpu_policy.errors import TraceError
from gpu_policy.packing.fragmentation import MILLI

NODE_FILE = "openb_node_list_all_node.csv"
POD_FILE = "openb_pod_list_default.csv"
MAX_GPUS_PER_NODE = 8


@dataclass(frozen=True)
class NodeList:
    names: list[str]
    cpu: np.ndarray        # millicores
    memory: np.ndarray     # MiB
    gpus: np.ndarray       # GPUs per node
    model: np.ndarray      # index into `models`, -1 for nodes without GPUs
    models: list[str]

    @property
    def gpu_capacity(self) -> int:
        return int(self.gpus.sum())


@dataclass(frozen=True)
class PodType:
    cpu: int       # millicores
    memory: int    # MiB
    gpus: int      # 0, 1 (whole or a share) or more whole GPUs
    milli: int     # thousandths of one GPU when gpus == 1, else 1000 (or 0 without GPUs)
    spec: frozenset[str] | None

    @property
    def gpu_milli(self) -> int:
        """GPU capacity the pod asks for, in thousandths of a GPU."""
        return self.milli if self.gpus == 1 else MILLI * self.gpus


@dataclass(frozen=True)
class PodList:
    """The trace's pods, as distinct types and the type of each pod."""
    types: list[PodType]
    type_of_pod: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(self.type_of_pod, minlength=len(self.types))


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"{path}: header: missing column {missing[0]!r}")
        rows = list(enumerate(reader, start=2))
    if not rows:
        raise TraceError(f"{path}: no rows")
    return rows


def _int(path: Path, line: int, row: dict[str, str], field: str, low: int = 0) -> int:
    text = (row.get(field) or "").strip()
    try:
        value = int(float(text))
    except ValueError:
        raise TraceError(f"{path}: line {line}: {field}: expected a number, got {text!r}") from None
    if value < low:
        raise TraceError(f"{path}: line {line}: {field}: must be >= {low}, got {value}")
    return value


def load_nodes(path: Path) -> NodeList:
    names, cpu, memory, gpus, model_names = [], [], [], [], []
    for line, row in _rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        count = _int(path, line, row, "gpu")
        if count > MAX_GPUS_PER_NODE:
            raise TraceError(f"{path}: line {line}: gpu: at most {MAX_GPUS_PER_NODE} per node, got {count}")
        model = (row.get("model") or "").strip()
        if count and not model:
            raise TraceError(f"{path}: line {line}: model: a node with GPUs needs its GPU model")
        names.append(row["sn"])
        cpu.append(_int(path, line, row, "cpu_milli"))
        memory.append(_int(path, line, row, "memory_mib"))
        gpus.append(count)
        model_names.append(model if count else "")
    if not any(gpus):
        raise TraceError(f"{path}: gpu: no node has GPUs")
    models = sorted({m for m in model_names if m})
    index = {m: i for i, m in enumerate(models)}
    return NodeList(names, np.array(cpu, dtype=float), np.array(memory, dtype=float),
                    np.array(gpus, dtype=np.int64), np.array([index.get(m, -1) for m in model_names]), models)


def load_pods(path: Path) -> PodList:
    types: dict[PodType, int] = {}
    type_of_pod = []
    for line, row in _rows(path, ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")):
        gpus = _int(path, line, row, "num_gpu")
        if gpus > MAX_GPUS_PER_NODE:
            raise TraceError(f"{path}: line {line}: num_gpu: at most {MAX_GPUS_PER_NODE}, got {gpus}")
        milli = _int(path, line, row, "gpu_milli") if gpus == 1 else MILLI * (gpus > 0)
        if gpus == 1 and not 0 < milli <= MILLI:
            raise TraceError(f"{path}: line {line}: gpu_milli: must be in 1..{MILLI} for one GPU, got {milli}")
        spec = frozenset(s.strip() for s in (row.get("gpu_spec") or "").split("|") if s.strip()) or None
        pod = PodType(_int(path, line, row, "cpu_milli"), _int(path, line, row, "memory_mib"), gpus, milli, spec)
        type_of_pod.append(types.setdefault(pod, len(types)))
    return PodList(list(types), np.array(type_of_pod, dtype=np.int64))


def load_trace(trace_dir: Path, node_file: str = NODE_FILE, pod_file: str = POD_FILE) -> tuple[NodeList, PodList]:
    trace_dir = Path(trace_dir)
    if not trace_dir.is_dir():
        raise TraceError(f"{trace_dir}: not a folder (expected the openb CSVs: {node_file}, {pod_file})")
    return load_nodes(trace_dir / node_file), load_pods(trace_dir / pod_file)
