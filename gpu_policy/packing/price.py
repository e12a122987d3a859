"""gpu-policy's packing price: what placing work on a node costs, in thousandths of a GPU.

Three parts, each for a way capacity gets lost (docs/policy.md, "Packing"):

- **Fragmentation growth.** The growth of FGD's expected fragmentation
  (`node_fragmentation`), plus `capacity_weight` times the growth of the node's
  **capacity shortfall**: FGD counts a GPU as usable by a task type when one such task
  fits on it, where the shortfall counts only what the node's free CPU and memory can
  feed at the type's CPU and memory per GPU, and for shares only whole tasks per GPU.
  So the CPU a pod takes from a node with free GPUs costs the GPUs it leaves without
  CPU, and a share that leaves a sliver no task of the type fills costs the sliver.
- **Best fit.** `best_fit_weight` times the GPU capacity left on the node: among
  placements that fragment alike, the fuller node (shipped at 0: see `BEST_FIT_WEIGHT`).
- **Model scarcity.** When the pods that may use only some GPU models would need more
  than those models have free, every other pod placed there displaces one of them:
  such a placement costs the GPU capacity it takes (`ModelDemand.scarcity`, `displaced`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_policy.packing.fragmentation import MILLI, WorkloadMix, task_fits, usable_share

#: Weight of the capacity shortfall's growth next to FGD's. Chosen with the best-fit
#: weight on held-out seeds 10-14 of the openb trace and its four variants: the most
#: workloads at least 0.5 points above FGD, then the largest worst-case gain
#: (docs/benchmarks-history.md, "openb packing: choosing the price").
CAPACITY_WEIGHT = 0.5

#: Weight of the GPU capacity a node has left after a placement, chosen with
#: `CAPACITY_WEIGHT`: 0. Best fit's pull to the fuller node also pulls to the smaller
#: node; the capacity shortfall keeps room where it can be used without that bias.
BEST_FIT_WEIGHT = 0.0


def capacity_shortfall(mix: WorkloadMix, cpu: np.ndarray, memory: np.ndarray, free: np.ndarray,
                       model: np.ndarray) -> np.ndarray:
    """Free GPU thousandths of each row that the mix could not fill, shape [N]: for
    each GPU type that fits, what it could use by FGD's count, but no more than the
    node's free CPU and memory can feed at the type's CPU and memory per GPU, and for
    shares only as many whole tasks as fit on each GPU (a GPU with 940 free holds two
    470s; with 1000, it leaves 60); CPU-only types as in `node_fragmentation`.
    Arguments as there."""
    return free.sum(axis=1) - _fillable(mix, cpu, memory, free, task_fits(mix, cpu, memory, free, model))


def _fillable(mix: WorkloadMix, cpu: np.ndarray, memory: np.ndarray, free: np.ndarray,
              fits: np.ndarray) -> np.ndarray:
    """The mix's mean over task types of the free thousandths each could fill."""
    share = (mix.gpus == 1) & (mix.milli < MILLI)
    asked = np.where(share, mix.milli, MILLI * mix.gpus).astype(float)  # per task
    by_gpus = np.zeros(fits.shape)                                      # tasks the free GPUs hold
    if share.any():
        sizes, which = np.unique(mix.milli[share], return_inverse=True)
        by_gpus[:, share] = (free[:, :, None] // sizes[None, None, :]).sum(axis=1)[:, which]
    whole = (mix.gpus >= 1) & ~share
    by_gpus[:, whole] = (free >= MILLI).sum(axis=1)[:, None] / mix.gpus[whole][None, :]
    tasks = np.minimum(by_gpus, np.minimum(_fed(cpu, mix.cpu), _fed(memory, mix.memory)))
    gpu = mix.gpus > 0
    fillable = (np.where(fits, tasks, 0)[:, gpu] * asked[gpu]) @ mix.weight[gpu]
    return fillable + (fits[:, ~gpu] * free.sum(axis=1)[:, None]) @ mix.weight[~gpu]


def _fed(have: np.ndarray, each: np.ndarray) -> np.ndarray:
    """How many tasks' worth of each request what each row has feeds, [N, T]
    (unbounded for a request of 0)."""
    with np.errstate(divide="ignore"):
        return np.where(each[None, :] > 0, have[:, None] / np.where(each > 0, each, 1)[None, :], np.inf)


def packing_fragmentation(mix: WorkloadMix, cpu: np.ndarray, memory: np.ndarray, free: np.ndarray,
                          model: np.ndarray, capacity_weight: float = CAPACITY_WEIGHT) -> np.ndarray:
    """The measure whose growth the price charges: FGD's expected fragmentation plus
    `capacity_weight` times the capacity shortfall. Arguments as `node_fragmentation`."""
    fits = task_fits(mix, cpu, memory, free, model)
    total = free.sum(axis=1)
    frag = total - usable_share(mix, free, fits)
    if capacity_weight:
        frag = frag + capacity_weight * (total - _fillable(mix, cpu, memory, free, fits))
    return frag


def placement_cost(fragmentation_growth: np.ndarray, gpu_free_after: np.ndarray,
                   best_fit_weight: float = BEST_FIT_WEIGHT, displaced: np.ndarray | float = 0.0) -> np.ndarray:
    """What placing work costs: the fragmentation it adds, a little for the free
    capacity it leaves on the node, and the GPU capacity of scarce models it takes
    from the pods that can use only them (`displaced`)."""
    return fragmentation_growth + best_fit_weight * gpu_free_after + displaced


@dataclass(frozen=True)
class ModelDemand:
    """The workload's GPU demand by the GPU models it may use, to price model scarcity.

    `cuts` are every union of the sets of model indices the task types may use (and all
    models): the sets some demand is confined to. `outside[c]` is the share of the GPU
    demand that may use a model outside cut c."""
    cuts: list[frozenset[int]]
    member: np.ndarray                   # [cuts, models]
    outside: np.ndarray                  # [cuts]

    @classmethod
    def of(cls, mix: WorkloadMix) -> ModelDemand:
        models = mix.models.shape[1]
        allowed = [frozenset(np.flatnonzero(row).tolist()) for row in mix.models]
        demand = mix.weight * np.where(mix.gpus == 1, mix.milli, MILLI * mix.gpus)
        share = demand / demand.sum() if demand.sum() else demand
        cuts = sorted(model_cuts([a for a, d in zip(allowed, demand) if d], frozenset(range(models))), key=sorted)
        member = np.array([[k in c for k in range(models)] for c in cuts], dtype=float).reshape(len(cuts), models)
        outside = np.array([sum(s for a, s in zip(allowed, share) if not a <= c) for c in cuts])
        return cls(cuts, member, outside)

    def scarcity(self, free_by_model: np.ndarray) -> np.ndarray:
        """1 for each model in the set whose confined demand most overfills its free
        capacity, else 0, when the demand arriving in proportion fills the free capacity
        (a max-flow min-cut: the set M minimising free(M) + demand outside M, when that
        is below all that is free)."""
        total = free_by_model.sum()
        value = self.member @ free_by_model + total * self.outside
        scarce = np.zeros(len(free_by_model))
        best = int(np.argmin(value)) if len(value) else 0
        if len(value) and value[best] < total * (1 - 1e-9):
            scarce[list(self.cuts[best])] = 1.0
        return scarce



def displaced(allowed: np.ndarray, scarce: np.ndarray, node_model: np.ndarray, gpu_milli: int) -> np.ndarray:
    """Per node, the GPU thousandths a pod would take from pods confined to scarce
    models (`ModelDemand.scarcity`): all it asks for on a scarce model, when it may use
    (`allowed`, a boolean per model) one that is not; else nothing."""
    if not gpu_milli or not allowed.any():
        return np.zeros(len(node_model))
    here = np.where(node_model >= 0, scarce[np.maximum(node_model, 0)], 0.0)
    return gpu_milli * np.maximum(here - scarce[allowed].min(), 0.0)


#: Most model sets `model_cuts` builds: beyond, or beyond `MAX_NAMED` distinct sets,
#: only the named sets and all models (their users stay correct, only less sharp).
MAX_CUTS = 4096
MAX_NAMED = 64


def model_cuts(named: list[frozenset], everything: frozenset) -> set[frozenset]:
    """The model sets demand can be confined to: every union of the `named` sets, and
    `everything`."""
    base = set(named) | {everything}
    if len(base) > MAX_NAMED:
        return base
    cuts, frontier = set(base), set(base)
    while frontier and len(cuts) <= MAX_CUTS:
        frontier = {a | b for a in frontier for b in base} - cuts
        cuts |= frontier
    return cuts if len(cuts) <= MAX_CUTS else base
