"""Placement policies compared by the simulator, one class each.

Every policy places one pod of type `t` at a time (`place_one`), or a window of
arriving pods (`place_window`, which by default places them one by one in arrival
order). A policy returns a `Placement`, or None when the pod fits nowhere.
Ties are broken at random with the run's generator, as a scheduler would.
"""

from __future__ import annotations

import numpy as np

from gpu_policy.packing.fragmentation import MILLI, node_fragmentation
from gpu_policy.sim.cluster import Measure, Placement, SimCluster, is_share, share_fits


class Policy:
    name = ""
    batched = False
    #: The fragmentation measure the run's cluster caches growth for.
    measure: Measure = staticmethod(node_fragmentation)

    def place_one(self, cluster: SimCluster, t: int, rng: np.random.Generator) -> Placement | None:
        raise NotImplementedError

    def place_window(self, cluster: SimCluster, window: list[int],
                     rng: np.random.Generator) -> list[Placement | None]:
        placed = []
        for t in window:
            where = self.place_one(cluster, t, rng)
            if where is not None:
                cluster.place(t, where)
            placed.append(where)
        return placed


def pick(scores: np.ndarray, rng: np.random.Generator) -> int | None:
    """Index of the lowest finite score; ties at random."""
    best = scores.min(initial=np.inf)
    if not np.isfinite(best):
        return None
    ties = np.flatnonzero(scores <= best + 1e-9)
    return int(ties[rng.integers(len(ties))]) if len(ties) > 1 else int(ties[0])


class RandomPolicy(Policy):
    """Any node the pod fits on, any GPU there that fits it."""
    name = "random"

    def place_one(self, cluster, t, rng):
        nodes = np.flatnonzero(cluster.fits(t))
        if not len(nodes):
            return None
        node = int(nodes[rng.integers(len(nodes))])
        pod = cluster.types[t]
        if is_share(pod):
            gpus = np.flatnonzero(share_fits(cluster.free[node], pod.milli))
            return Placement(node, (int(gpus[rng.integers(len(gpus))]),))
        return Placement(node, cluster.gpus_for(t, node))


class SpreadPolicy(Policy):
    """Least allocated by GPU: the node with the largest free share of its GPU
    capacity, then the most free GPU capacity; a share goes to the emptiest GPU.
    (docs/benchmarks.md compares the other readings of Kubernetes' LeastAllocated.)"""
    name = "spread"

    def place_one(self, cluster, t, rng):
        pod = cluster.types[t]
        free = cluster.free.sum(axis=1)
        share = free / np.maximum(cluster.nodes.gpus, 1) / MILLI
        node = pick(np.where(cluster.fits(t), -(share + free / 1e6), np.inf), rng)
        if node is None:
            return None
        if is_share(pod):
            return Placement(node, (int(np.argmax(cluster.free[node])),))
        return Placement(node, cluster.gpus_for(t, node))


class BestFitPolicy(Policy):
    """The node left with the least free GPU share after placing (then the least
    free CPU); a share goes to the fullest GPU that fits."""
    name = "best-fit"

    def place_one(self, cluster, t, rng):
        pod = cluster.types[t]
        fits = cluster.fits(t)
        gpu_after = cluster.free.sum(axis=1) - pod.gpu_milli
        cpu_after = (cluster.cpu - pod.cpu) / cluster.nodes.cpu.max()
        node = pick(np.where(fits, gpu_after + cpu_after, np.inf), rng)
        if node is None:
            return None
        return Placement(node, cluster.gpus_for(t, node))


class FgdPolicy(Policy):
    """Fragmentation Gradient Descent: the node and GPU where the expected
    fragmentation grows least (Weng et al., USENIX ATC '23)."""
    name = "fgd"

    def place_one(self, cluster, t, rng):
        growth, level = cluster.fragmentation_delta(t)
        node = pick(growth, rng)
        if node is None:
            return None
        return Placement(node, cluster.gpus_for(t, node, int(level[node])))
