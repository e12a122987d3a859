"""Loaders for the Alibaba openb GPU trace (cluster-trace-gpu-v2023).

Nodes: sn, cpu_milli, memory_mib, gpu, model. Pods need name, cpu_milli,
memory_mib, num_gpu and gpu_milli (the share of one GPU in thousandths when
num_gpu is 1); gpu_spec (allowed models, '|'-separated) is optional, and a pod
without it may use any model; other columns (qos, phases, times) are not read.
The publisher's pod lists do not all have the same columns, so only these are
required (docs/simulate.md).

Counts (gpu, num_gpu, gpu_milli) must be whole numbers; cpu_milli and
memory_mib are finite numbers, rounded to whole millicores and MiB. A bad file
is one `TraceError` line naming the file, line and field; files are read
through `gpu_policy.model.safe_load` (size limit, UTF-8).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpu_policy.errors import TraceError
from gpu_policy.packing.fragmentation import MILLI
from gpu_policy.model.safe_load import DEFAULT_LIMITS, InputLimits
from gpu_policy.sim.tables import cell_number, read_rows

NODE_FILE = "openb_node_list_all_node.csv"
POD_FILE = "openb_pod_list_default.csv"
MAX_GPUS_PER_NODE = 8
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
#: Upper bounds of the resource columns: far above any machine, so that sums stay exact.
MAX_CPU_MILLI, MAX_MEMORY_MIB = 10 ** 9, 10 ** 12


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


def _number(path: Path, line: int, row: dict[str, str], field: str, whole: bool, high: int) -> int:
    """A column's value: a whole number (counts) or a finite one rounded to whole (resources)."""
    return round(cell_number(path, line, row, field, low=0, high=high, whole=whole))


def _count(path: Path, line: int, row: dict[str, str], field: str, high: int = MAX_GPUS_PER_NODE) -> int:
    return _number(path, line, row, field, True, high)


def _resources(path: Path, line: int, row: dict[str, str]) -> tuple[int, int]:
    return (_number(path, line, row, "cpu_milli", False, MAX_CPU_MILLI),
            _number(path, line, row, "memory_mib", False, MAX_MEMORY_MIB))


def load_nodes(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> NodeList:
    names, cpu, memory, gpus, model_names = [], [], [], [], []
    for line, row in read_rows(path, NODE_COLUMNS, limits):
        count = _count(path, line, row, "gpu")
        model = (row.get("model") or "").strip()
        if count and not model:
            raise TraceError(f"{path}: line {line}: model: a node with GPUs needs its GPU model")
        node_cpu, node_memory = _resources(path, line, row)
        names.append(row["sn"])
        cpu.append(node_cpu)
        memory.append(node_memory)
        gpus.append(count)
        model_names.append(model if count else "")
    if not any(gpus):
        raise TraceError(f"{path}: gpu: no node has GPUs")
    models = sorted({m for m in model_names if m})
    index = {m: i for i, m in enumerate(models)}
    return NodeList(names, np.array(cpu, dtype=float), np.array(memory, dtype=float),
                    np.array(gpus, dtype=np.int64), np.array([index.get(m, -1) for m in model_names]), models)


def load_pods(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> PodList:
    """The pod list; `gpu_spec` is optional (absent or empty: any GPU model)."""
    types: dict[PodType, int] = {}
    type_of_pod = []
    for line, row in read_rows(path, POD_COLUMNS, limits):
        gpus = _count(path, line, row, "num_gpu")
        milli = _count(path, line, row, "gpu_milli", MILLI) if gpus == 1 else MILLI * (gpus > 0)
        if gpus == 1 and milli == 0:
            raise TraceError(f"{path}: line {line}: gpu_milli: must be from 1 to {MILLI} for one GPU, got 0")
        spec = frozenset(s.strip() for s in (row.get("gpu_spec") or "").split("|") if s.strip()) or None
        pod = PodType(*_resources(path, line, row), gpus, milli, spec)
        type_of_pod.append(types.setdefault(pod, len(types)))
    if not any(t.gpus for t in types):
        raise TraceError(f"{path}: num_gpu: no pod asks for a GPU (the experiment places GPU pods)")
    return PodList(list(types), np.array(type_of_pod, dtype=np.int64))


def load_trace(trace_dir: Path, node_file: str = NODE_FILE, pod_file: str = POD_FILE,
               limits: InputLimits = DEFAULT_LIMITS) -> tuple[NodeList, PodList]:
    trace_dir = Path(trace_dir)
    if not trace_dir.is_dir():
        raise TraceError(f"{trace_dir}: not a folder (expected the openb CSVs: {node_file}, {pod_file})")
    return load_nodes(trace_dir / node_file, limits), load_pods(trace_dir / pod_file, limits)
