"""Expected GPU fragmentation of a node with respect to a workload mix.

The measure of FGD (Weng et al., "Beware of Fragmentation", USENIX ATC '23): for a
task type m, the free GPU capacity of node n that m cannot use is a fragment. If m
cannot run on n at all (too few CPUs, memory, whole GPUs or GPU share, or the
wrong GPU model), every free GPU of n is a fragment; if it can, the GPUs whose
free share is below what m asks of one GPU are. The node's fragmentation is the
mean over the mix, weighted by each type's share of the workload:

    F(n) = total_free(n) - sum_m p_m * fits(n, m) * usable(n, m)
    usable(n, m) = sum of free_g over GPUs g of n with free_g >= min(demand_m, 1 GPU)

GPU amounts are integers in thousandths of a GPU (`MILLI`), like the openb trace,
so equal states compare equal. Everything is vectorised over node states: rows
of `free` are nodes (or hypothetical nodes), columns their GPUs, padded with 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MILLI = 1000


@dataclass(frozen=True)
class WorkloadMix:
    """Task types with their share of the workload.

    `gpus` is the number of GPUs (0 for CPU-only types), `milli` the share of one
    GPU in thousandths for single-GPU types (1000 = a whole GPU), `models[t, k]`
    whether type t may run on GPU model k (a column per model, in the cluster's
    model order)."""

    cpu: np.ndarray
    memory: np.ndarray
    gpus: np.ndarray
    milli: np.ndarray
    models: np.ndarray
    weight: np.ndarray

    @classmethod
    def build(cls, types: list[tuple[float, float, int, int, frozenset[str] | None]],
              counts: list[float], model_names: list[str]) -> WorkloadMix:
        """`types`: (cpu, memory, gpus, milli, allowed models or None) per type."""
        if not types:
            raise ValueError("workload mix: needs at least one task type")
        total = float(sum(counts))
        if total <= 0:
            raise ValueError("workload mix: the type counts must add up to more than 0")
        allowed = np.array([[spec is None or name in spec for name in model_names] for *_, spec in types],
                           dtype=bool).reshape(len(types), len(model_names))
        return cls(
            cpu=np.array([t[0] for t in types], dtype=float),
            memory=np.array([t[1] for t in types], dtype=float),
            gpus=np.array([t[2] for t in types], dtype=np.int64),
            milli=np.array([t[3] if t[2] == 1 else MILLI * (t[2] > 0) for t in types], dtype=np.int64),
            models=allowed,
            weight=np.asarray(counts, dtype=float) / total,
        )

    def only(self, t: int) -> WorkloadMix:
        """The mix of type t alone."""
        pick = slice(t, t + 1)
        return WorkloadMix(self.cpu[pick], self.memory[pick], self.gpus[pick], self.milli[pick],
                           self.models[pick], np.ones(1))

    @property
    def thresholds(self) -> np.ndarray:
        """Free share a GPU needs to be usable by each type: 0 for CPU-only types."""
        return np.where(self.gpus == 0, 0, np.minimum(self.milli, MILLI))


def task_fits(mix: WorkloadMix, cpu: np.ndarray, memory: np.ndarray, free: np.ndarray,
              model: np.ndarray) -> np.ndarray:
    """Whether each task type of the mix could run on each node now, shape [N, T]:
    CPU and memory, then for GPU types the GPU model and either one GPU with the
    share free or enough whole free GPUs. Arguments as for `node_fragmentation`."""
    whole_free = (free >= MILLI).sum(axis=1)
    largest = free.max(axis=1, initial=0)
    fits = (cpu[:, None] >= mix.cpu[None, :]) & (memory[:, None] >= mix.memory[None, :])
    gpu_ok = np.where(mix.gpus[None, :] == 0, True,
                      np.where(mix.gpus[None, :] == 1, largest[:, None] >= mix.milli[None, :],
                               whole_free[:, None] >= mix.gpus[None, :]))
    model_ok = np.where(model[:, None] >= 0, mix.models.T[np.maximum(model, 0)], True) | (mix.gpus[None, :] == 0)
    return fits & gpu_ok & model_ok


def node_fragmentation(mix: WorkloadMix, cpu: np.ndarray, memory: np.ndarray, free: np.ndarray,
                       model: np.ndarray) -> np.ndarray:
    """F(n) for each row: `cpu`, `memory` free per node (shape [N]), `free` GPU
    thousandths per node and GPU ([N, G]), `model` the GPU model index per node
    (-1: no GPUs). Returns thousandths of a GPU, shape [N]."""
    return free.sum(axis=1) - usable_share(mix, free, task_fits(mix, cpu, memory, free, model))


def usable_share(mix: WorkloadMix, free: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """The mix's mean over task types of the free thousandths each can use (FGD's
    complement of fragments), given `fits` from `task_fits`."""
    levels, which = np.unique(mix.thresholds, return_inverse=True)
    usable = (free[:, :, None] * (free[:, :, None] >= levels[None, None, :])).sum(axis=1)
    return (fits * usable[:, which]) @ mix.weight
