"""Prices for the packing stage: how much each candidate placement grows the
node's expected fragmentation (`gpu_policy.packing`), judged on the cluster as it
is before the plan. The workload mix is the scenario's own jobs, running and
waiting (each job counts once), unless the config names one.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from gpu_policy.model import Job, Scenario
from gpu_policy.packing import MILLI, WorkloadMix, packing_fragmentation, placement_cost
from gpu_policy.planner.layout import Layout, spare_resources

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
    spare = spare_resources(s, {j.name for j in s.jobs if j.is_running})
    width = max(len(nl.slots) for nl in layout.nodes.values()) or 1
    free_of: dict[str, np.ndarray] = {}  # node -> free thousandths per GPU (unhealthy: 0)
    before, after, cpu, mem, model = [], [], [], [], []
    for job, node, gpu in options:
        nl = layout.nodes[node]
        if node not in free_of:
            free_of[node] = np.array([round((1 - slot.used) * MILLI) if nl.healthy(i) else 0
                                      for i, slot in enumerate(nl.slots)] + [0] * (width - len(nl.slots)))
        free = free_of[node].copy()
        if gpu is not None:
            free[gpu] -= _milli(job)
        else:
            free[np.flatnonzero(free >= MILLI)[:int(job.gpus)]] = 0
        before.append(free_of[node])
        after.append(free)
        cpu.append((spare[node].get("cpu", UNLIMITED), job.cpu or 0.0))
        mem.append((spare[node].get("memory_gib", UNLIMITED), job.memory_gib or 0.0))
        model.append(index[nl.node.gpu_model or ""])
    (cpu_now, cpu_job), (mem_now, mem_job) = np.array(cpu).T, np.array(mem).T
    model_ix, free_after = np.array(model), np.array(after)
    grow = (packing_fragmentation(mix, cpu_now - cpu_job, mem_now - mem_job, free_after, model_ix)
            - packing_fragmentation(mix, cpu_now, mem_now, np.array(before), model_ix))
    return (placement_cost(grow, free_after.sum(axis=1)) / MILLI).tolist()


def _gpu_count(j: Job) -> int:
    return 1 if j.is_fractional else int(j.gpus)


def _milli(j: Job) -> int:
    return round(j.gpus * MILLI) if j.is_fractional else MILLI
