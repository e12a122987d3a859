"""The FGD paper's workload-inflation experiment.

Pods are sampled from the trace with replacement and placed as they arrive, none
leave, until the GPU capacity they asked for reaches `inflate` times the
cluster's. A pod that fits nowhere is dropped. The figure of merit is the share
of GPU capacity allocated at the end; the curve records unallocated GPU capacity
against arrived workload, both in percent of capacity.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from gpu_policy.packing.fragmentation import MILLI
from gpu_policy.sim.bound import Arrivals, allocation_bound
from gpu_policy.sim.cluster import SimCluster, is_share
from gpu_policy.sim.openb import NodeList, PodList
from gpu_policy.sim.policies import Policy

#: Points of the curve: one each time another half percent of capacity has arrived.
CURVE_STEP_PERCENT = 0.5


@dataclass
class RunResult:
    policy: str
    seed: int
    allocation_ratio: float          # allocated GPU capacity / total, at the end
    pods_arrived: int
    pods_placed: int
    latencies_s: list[float]         # one per decision: per pod, or per window
    curve: list[tuple[float, float]] = field(default_factory=list)  # (arrived %, unallocated %)


def pod_stream(pods: PodList, seed: int, target_milli: float) -> Iterator[int]:
    """The pod types of one seed's arrivals, until `target_milli` of GPU capacity
    has been asked for: the same stream for every policy."""
    rng = np.random.default_rng([seed, 0])
    asked = 0
    while asked < target_milli:
        t = int(pods.type_of_pod[rng.integers(len(pods.type_of_pod))])
        asked += pods.types[t].gpu_milli
        yield t


def stream_bound(nodes: NodeList, pods: PodList, seed: int, inflate: float = 1.0) -> float:
    """`allocation_bound` of one seed's stream: no policy allocates more."""
    arrived = np.bincount(list(pod_stream(pods, seed, inflate * nodes.gpu_capacity * MILLI)),
                          minlength=len(pods.types))
    types = pods.types
    arrivals = Arrivals(np.array([t.gpu_milli for t in types]), np.array([t.milli if is_share(t) else 0 for t in types]),
                        [t.spec for t in types], arrived)
    capacity = {m: int(nodes.gpus[nodes.model == k].sum()) * MILLI for k, m in enumerate(nodes.models)}
    return allocation_bound(arrivals, capacity)


def run(nodes: NodeList, pods: PodList, policy: Policy, seed: int, inflate: float = 1.0, window: int = 1,
        progress: Callable[[float], None] | None = None) -> RunResult:
    """Place one seed's pods with `policy`: `window` pods per decision for batched
    policies, one for the others."""
    cluster = SimCluster(nodes, pods, measure=policy.measure)
    choices = np.random.default_rng([seed, 1])
    target = inflate * cluster.capacity_milli
    stream = pod_stream(pods, seed, target)
    size = window if policy.batched else 1
    arrived = placed = count = 0
    latencies: list[float] = []
    curve = [(0.0, 100.0)]
    while batch := [t for _, t in zip(range(size), stream)]:
        began = time.perf_counter()
        result = policy.place_window(cluster, batch, choices)
        latencies.append(time.perf_counter() - began)
        count += len(batch)
        placed += sum(r is not None for r in result)
        arrived += sum(pods.types[t].gpu_milli for t in batch)
        share = 100.0 * arrived / cluster.capacity_milli
        if share - curve[-1][0] >= CURVE_STEP_PERCENT or arrived >= target:
            curve.append((share, 100.0 - 100.0 * cluster.allocated_milli / cluster.capacity_milli))
            if progress:
                progress(min(1.0, arrived / target))
    return RunResult(policy.name, seed, cluster.allocated_milli / cluster.capacity_milli, count, placed,
                     latencies, curve)
