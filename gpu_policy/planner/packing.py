"""Prices for the packing stage: how much each candidate placement grows the
node's expected fragmentation (`gpu_policy.packing`), judged on the cluster as it
is before the plan. The workload mix is the scenario's own jobs, running and
waiting (each job counts once), unless the config names one.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from gpu_policy.model import Job, Scenario
from gpu_policy.packing.fragmentation import MILLI, WorkloadMix, node_fragmentation, placement_cost
from gpu_policy.planner.layout import Layout

#: Stands in for the CPU or memory of a node that does not declare it.
UNLIMITED = 1e12


def scenario_mix(s: Scenario) -> WorkloadMix:
    """The jobs of the scenario as the expected workload."""
    models = gpu_models(s)
    kinds = Counter((j.cpu or 0.0, j.memory_gib or 0.0, _gpu_count(j), _milli(j),
                     frozenset(j.gpu_model) if j.gpu_model else None) for j in s.jobs)
    return WorkloadMix.build(list(kinds), list(kinds.values()), models)


def gpu_models(s: Scenario) -> list[str]:
    return sorted({n.gpu_model or "" for n in s.nodes})


def placement_costs(s: Scenario, layout: Layout, mix: WorkloadMix,
                    options: list[tuple[Job, str, int | None]]) -> list[float]:
    """The cost of one replica of each (job, node, GPU for a fraction) option, in GPUs."""
    if not options:
        return []
    index = {m: i for i, m in enumerate(gpu_models(s))}
    spare = _spare(s, layout)
    rows = []
    for job, node, gpu in options:
        nl = layout.nodes[node]
        free = np.zeros(max(len(nl.slots), 1), dtype=np.int64)
        for i, slot in enumerate(nl.slots):
            if nl.healthy(i):
                free[i] = round((1 - slot.used) * MILLI)
        before = free.copy()
        if gpu is not None:
            free[gpu] -= _milli(job)
        else:
            free[np.flatnonzero(free >= MILLI)[:int(job.gpus)]] = 0
        cpu, mem = spare[node]
        rows.append((before, free, cpu, mem, (job.cpu or 0.0), (job.memory_gib or 0.0), index[nl.node.gpu_model or ""]))
    width = max(len(r[0]) for r in rows)
    pad = lambda a: np.pad(a, (0, width - len(a)))  # noqa: E731
    free_before = np.array([pad(r[0]) for r in rows])
    free_after = np.array([pad(r[1]) for r in rows])
    cpu = np.array([r[2] for r in rows])
    mem = np.array([r[3] for r in rows])
    model = np.array([r[6] for r in rows])
    grow = (node_fragmentation(mix, cpu - [r[4] for r in rows], mem - [r[5] for r in rows], free_after, model)
            - node_fragmentation(mix, cpu, mem, free_before, model))
    return (placement_cost(grow, free_after.sum(axis=1)) / MILLI).tolist()


def _gpu_count(j: Job) -> int:
    return 1 if j.is_fractional else int(j.gpus)


def _milli(j: Job) -> int:
    return round(j.gpus * MILLI) if j.is_fractional else MILLI


def _spare(s: Scenario, layout: Layout) -> dict[str, tuple[float, float]]:
    """CPU and memory each node's running jobs leave (unlimited where undeclared)."""
    cpu = {n: nl.node.cpu if nl.node.cpu is not None else UNLIMITED for n, nl in layout.nodes.items()}
    mem = {n: nl.node.memory_gib if nl.node.memory_gib is not None else UNLIMITED for n, nl in layout.nodes.items()}
    for j in s.jobs:
        for node in j.running:
            cpu[node] -= j.cpu or 0
            mem[node] -= j.memory_gib or 0
    return {n: (cpu[n], mem[n]) for n in layout.nodes}
