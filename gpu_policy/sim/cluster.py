"""The simulated cluster: free CPU, memory and GPU share per node, and where each
pod type fits and how much it would fragment each node.

GPU shares are integers in thousandths (`MILLI`). A pod of one GPU with a share
below 1000 goes to one GPU that has that much free; a pod of whole GPUs takes
GPUs that are entirely free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gpu_policy.packing.fragmentation import MILLI, WorkloadMix, node_fragmentation, task_fits
from gpu_policy.packing.price import ModelDemand
from gpu_policy.model.layout import fits_on_gpu
from gpu_policy.sim.openb import MAX_GPUS_PER_NODE, NodeList, PodList, PodType

NO_FIT = np.inf

#: A fragmentation measure: (mix, cpu, memory, free, model) of N nodes -> N values
#: in GPU thousandths, like `node_fragmentation`.
Measure = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Placement:
    node: int
    gpus: tuple[int, ...]  # GPU indices on the node; empty for CPU-only pods


class SimCluster:
    """`measure` is the fragmentation whose growth `fragmentation_delta` gives: FGD's
    by default, the packing price's for gpu-policy's own policy."""

    def __init__(self, nodes: NodeList, pods: PodList, mix: WorkloadMix | None = None,
                 measure: Measure = node_fragmentation):
        self.nodes = nodes
        self.measure = measure
        self.types = pods.types
        self._table = workload_mix(pods, nodes.models)  # the pod types, in order, for `task_fits`
        self._each = [self._table.only(t) for t in range(len(self.types))]
        self.mix = mix or self._table
        n = len(nodes.names)
        self.cpu = nodes.cpu.copy()
        self.memory = nodes.memory.copy()
        self.free = np.zeros((n, MAX_GPUS_PER_NODE), dtype=np.int64)
        for i, count in enumerate(nodes.gpus):
            self.free[i, :count] = MILLI
        self.model = nodes.model
        self.allocated_milli = 0
        self._delta = np.zeros((n, len(self.types)))
        self._level = np.zeros((n, len(self.types)), dtype=np.int64)
        self._dirty = np.ones(n, dtype=bool)
        self._rows: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def scratch(self) -> SimCluster:
        """A copy to try placements on; it shares the fragmentation cache."""
        copy = object.__new__(SimCluster)
        copy.__dict__.update(self.__dict__)
        for name in ("cpu", "memory", "free", "_delta", "_level", "_dirty"):
            setattr(copy, name, getattr(self, name).copy())
        return copy

    @property
    def capacity_milli(self) -> int:
        return self.nodes.gpu_capacity * MILLI

    @cached_property
    def model_demand(self) -> ModelDemand:
        """The mix's GPU demand by the models it may use (shared by scratch copies)."""
        return ModelDemand.of(self.mix)

    def allowed_models(self, t: int) -> np.ndarray:
        """Whether a pod of type t may use each GPU model."""
        return self._table.models[t]

    def free_by_model(self) -> np.ndarray:
        """Free GPU thousandths per GPU model."""
        gpu = self.model >= 0
        return np.bincount(self.model[gpu], weights=self.free[gpu].sum(axis=1), minlength=len(self.nodes.models))

    def fits(self, t: int) -> np.ndarray:
        """Nodes where a pod of type t fits now, as a boolean mask."""
        return task_fits(self._each[t], self.cpu, self.memory, self.free, self.model)[:, 0]

    def gpus_for(self, t: int, node: int, level: int | None = None) -> tuple[int, ...]:
        """GPU indices a pod of type t takes on `node`: for a share, the first GPU
        with exactly `level` free (default: the fullest GPU it fits on)."""
        pod = self.types[t]
        if pod.gpus == 0:
            return ()
        row = self.free[node]
        if is_share(pod):
            if level is None:
                level = int(row[share_fits(row, pod.milli)].min())
            return (int(np.flatnonzero(row == level)[0]),)
        return tuple(int(i) for i in np.flatnonzero(row >= MILLI)[:pod.gpus])

    def place(self, t: int, where: Placement) -> None:
        pod = self.types[t]
        self.cpu[where.node] -= pod.cpu
        self.memory[where.node] -= pod.memory
        share = pod.milli if is_share(pod) else MILLI
        for g in where.gpus:
            if not share_fits(self.free[where.node, g], share):
                raise ValueError(f"GPU {g} of node {where.node} has {self.free[where.node, g]} free, needs {share}")
            self.free[where.node, g] -= share
        if min(self.cpu[where.node], self.memory[where.node]) < 0:
            raise ValueError(f"node {where.node} overcommitted")
        self.allocated_milli += pod.gpu_milli
        self._dirty[where.node] = True

    def fragmentation_delta(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """How much each node's expected fragmentation would grow if a pod of type t
        went there (inf where it does not fit), and for shares, the free level of
        the GPU that grows it least."""
        for n in np.flatnonzero(self._dirty):
            self._delta[n], self._level[n] = self._row(int(n))
        self._dirty[:] = False
        return self._delta[:, t], self._level[:, t]

    def fragmentation(self) -> float:
        """The cluster's fragmentation by its measure, in GPUs."""
        return float(self.measure(self.mix, self.cpu, self.memory, self.free, self.model).sum()) / MILLI

    def _row(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        count = int(self.nodes.gpus[n])
        key = (int(self.model[n]), float(self.cpu[n]), float(self.memory[n]),
               tuple(sorted(self.free[n, :count].tolist(), reverse=True)))
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self._compute_row(n)
        return row

    def _compute_row(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        free = self.free[n]
        levels = sorted({int(v) for v in free[free > 0]})
        cpu, mem, model = self.cpu[n], self.memory[n], int(self.model[n])
        rows_free, rows_cpu, rows_mem, owner, chosen = [free], [cpu], [mem], [-1], [0]
        fits = task_fits(self._table, self.cpu[n:n + 1], self.memory[n:n + 1], free[None], self.model[n:n + 1])[0]
        for t in map(int, np.flatnonzero(fits)):
            pod = self.types[t]
            if pod.gpus == 0:
                options = [(free, 0)]
            elif is_share(pod):
                options = []
                for level in levels:
                    if share_fits(level, pod.milli):
                        after = free.copy()
                        after[int(np.flatnonzero(free == level)[0])] -= pod.milli
                        options.append((after, level))
            else:
                after = free.copy()
                after[np.flatnonzero(free >= MILLI)[:pod.gpus]] = 0
                options = [(after, MILLI)]
            for after, level in options:
                rows_free.append(after)
                rows_cpu.append(cpu - pod.cpu)
                rows_mem.append(mem - pod.memory)
                owner.append(t)
                chosen.append(level)
        frag = self.measure(self.mix, np.array(rows_cpu), np.array(rows_mem), np.array(rows_free),
                            np.full(len(rows_free), model))
        delta = np.full(len(self.types), NO_FIT)
        level = np.zeros(len(self.types), dtype=np.int64)
        for i in range(1, len(frag)):
            t = owner[i]
            d = frag[i] - frag[0]
            if d < delta[t]:
                delta[t], level[t] = d, chosen[i]
        return delta, level


def share_fits(free, milli: int):
    """Whether a share of `milli` thousandths fits on a GPU with `free` thousandths free (a
    number or an array of them): the planner's rule (`gpu_policy.model.layout.fits_on_gpu`), in thousandths."""
    return fits_on_gpu(1 - free / MILLI, milli / MILLI)


def is_share(pod: PodType) -> bool:
    """A pod that asks for part of one GPU (which other pods may share)."""
    return pod.gpus == 1 and pod.milli < MILLI


def workload_mix(pods: PodList, models: list[str]) -> WorkloadMix:
    """The expected workload: the trace's pod types weighted by how often they occur."""
    return WorkloadMix.build([(t.cpu, t.memory, t.gpus, t.milli, t.spec) for t in pods.types],
                             pods.counts.tolist(), models)
