"""Kueue's Topology Aware Scheduling as a policy, and the topology-blind best fit by node.

Read from Kueue's source (pkg/cache/scheduler/tas_flavor_snapshot.go: findTopologyAssignment,
findLevelWithFitDomains, findBestFitDomainForSlices, updateCountsToMinimumGeneric,
sortedDomains; the profiles in keps/2724-topology-aware-scheduling), modelled here for
whole-GPU pods and a slice size of 1:

- Waiting jobs are tried in arrival order, each alone; one that does not fit waits and the
  next is tried (the BestEffortFIFO queueing strategy). No preemption and no moves: among
  jobs of one priority Kueue preempts nobody.
- A domain's count is how many of the job's pods its nodes' free GPUs hold.
- At the requested level (required or preferred; a job asking neither: the node), if the
  largest domain holds the job, the one that holds it most tightly takes it (BestFit; ties
  by the level's values, here the domain's index). A required job that no domain holds
  waits; a preferred one climbs to the next wider level and tries again; at the widest
  level, or for a job asking nothing, it spreads: the largest domains first, the tightest
  for the rest.
- Then down to the nodes: among the chosen domains' children, the largest first and the
  tightest for the rest, so that the job uses as few of them as it can.
- A job asking nothing uses LeastFreeCapacity at the node level: the nodes with the fewest
  free pods first.
"""

from __future__ import annotations

import numpy as np

from gpu_policy.sim.topology.cluster import LEVEL_NAMES, Cluster
from gpu_policy.sim.topology.policy import Decision, View
from gpu_policy.sim.topology.workload import Gang


class BestFitPolicy:
    """Kueue's TAS best fit (`blind=False`), or the same placement for jobs that ask no
    topology applied to every job (`blind=True`): best fit by node, replica by replica."""

    def __init__(self, blind: bool = False):
        self.blind = blind
        self.name = "topology-blind" if blind else "best-fit"

    def decide(self, view: View) -> Decision:
        free = view.cluster.free.copy()
        trial = Cluster(view.cluster.shape)
        trial.free = free
        decision = Decision()
        for g in view.waiting:
            nodes = place(trial, g, blind=self.blind)
            if nodes is not None:
                trial.take(nodes, g.gpus)
                decision.start[g.name] = nodes
        return decision


def place(cluster: Cluster, g: Gang, blind: bool = False) -> tuple[int, ...] | None:
    """The nodes (one per replica) Kueue would assign `g` on `cluster`, or None: it waits."""
    pods = cluster.free // g.gpus
    required, preferred = (None, None) if blind else (g.required, g.preferred)
    if required is None and preferred is None:
        return _spread_nodes(pods, g.replicas)
    level = LEVEL_NAMES.index(required or preferred)
    while True:
        counts = _counts(cluster, pods, level)
        if counts.max() >= g.replicas:
            chosen = {_tightest(counts, g.replicas): g.replicas}
            break
        if required is not None and LEVEL_NAMES[level] == required:
            return None
        if level == 0:
            if counts.sum() < g.replicas:
                return None
            chosen = _fewest(counts, g.replicas)
            break
        level -= 1
    return _descend(cluster, pods, level, chosen)


def _counts(cluster: Cluster, pods: np.ndarray, level: int) -> np.ndarray:
    """Pods each domain of `level` holds (domains are runs of consecutive nodes)."""
    return pods.reshape(-1, cluster.shape.nodes_per(LEVEL_NAMES[level])).sum(axis=1)


def _tightest(counts: np.ndarray, need: int) -> int:
    """The domain that holds `need` with the fewest pods to spare (ties: the lowest index)."""
    fits = np.flatnonzero(counts >= need)
    return int(fits[np.argmin(counts[fits])])  # argmin: the first of equals


def _fewest(counts: np.ndarray, need: int) -> dict[int, int]:
    """As few domains as hold `need`: the largest first, the tightest for the rest
    (ties: the lowest index). Domain -> pods taken there."""
    order = np.lexsort((np.arange(len(counts)), -counts))
    taken: dict[int, int] = {}
    left = need
    for d in order:
        if left == 0 or counts[d] == 0:
            break
        if counts[d] >= left:
            rest = [int(e) for e in order if e not in taken and counts[e] >= left]
            best = min(rest, key=lambda e: (counts[e], e))
            taken[best] = left
            left = 0
        else:
            taken[int(d)] = int(counts[d])
            left -= int(counts[d])
    return taken


def _descend(cluster: Cluster, pods: np.ndarray, level: int, chosen: dict[int, int]) -> tuple[int, ...]:
    """From the chosen domains of `level` down to nodes, each level using as few children as
    hold each domain's pods."""
    shape = cluster.shape
    for child in range(level + 1, len(LEVEL_NAMES)):
        per = shape.nodes_per(LEVEL_NAMES[child - 1]) // shape.nodes_per(LEVEL_NAMES[child])
        counts = _counts(cluster, pods, child)
        below: dict[int, int] = {}
        for d, need in chosen.items():
            kids = np.arange(d * per, (d + 1) * per)
            for k, n in _fewest(counts[kids], need).items():
                below[int(kids[k])] = n
        chosen = below
    nodes: list[int] = []
    for n, k in sorted(chosen.items()):
        nodes += [n] * k
    return tuple(nodes)


def _spread_nodes(pods: np.ndarray, need: int) -> tuple[int, ...] | None:
    """LeastFreeCapacity by node: the nodes holding the fewest of the job's pods first
    (ties: the lowest index), as many pods on each as it holds."""
    if pods.sum() < need:
        return None
    nodes: list[int] = []
    for n in np.lexsort((np.arange(len(pods)), pods)):
        if pods[n] == 0:
            continue
        k = min(int(pods[n]), need - len(nodes))
        nodes += [int(n)] * k
        if len(nodes) == need:
            break
    return tuple(sorted(nodes))
