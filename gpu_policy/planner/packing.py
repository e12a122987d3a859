"""Packing: what a placement costs, and placing jobs on given nodes at those prices.

The price of a placement is gpu-policy's packing price (`gpu_policy.packing.price`, the
one the simulator's `ours-*` policies use): how much it grows the node's expected
fragmentation and capacity shortfall, judged on the node's GPUs as they are and its CPUs
and memory as the running jobs leave them, plus the capacity it takes from work confined
to scarce GPU models. The workload mix is the scenario's own jobs, running and waiting
(each job counts once), unless the config names one.

`pack` is the planner's packing step for pooled nodes, and works on its own: give it a
layout, the jobs to place and the nodes each may use, and it places them greedily,
largest first, each replica where it opens no empty node if it can and costs least.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Callable

import numpy as np

from gpu_policy.model import Job, Scenario
from gpu_policy.packing import MILLI, ModelDemand, WorkloadMix, displaced, packing_fragmentation, placement_cost
from gpu_policy.plan import Placement
from gpu_policy.planner.layout import Layout, NodeLayout, place, spare_resources

#: Stands in for the CPU or memory of a node that does not declare it.
UNLIMITED = 1e12


def scenario_mix(s: Scenario) -> WorkloadMix | None:
    """The jobs of the scenario as the expected workload (None: no jobs, nothing to price)."""
    if not s.jobs:
        return None
    models = gpu_models(s)
    kinds = Counter((j.cpu or 0.0, j.memory_gib or 0.0, _gpu_count(j), _milli(j),
                     frozenset(j.gpu_model) if j.gpu_model else None) for j in s.jobs)
    return WorkloadMix.build(list(kinds), list(kinds.values()), models)


def gpu_models(s: Scenario) -> list[str]:
    return sorted({n.gpu_model or "" for n in s.nodes})


def model_scarcity(layout: Layout, mix: WorkloadMix, models: list[str]) -> np.ndarray:
    """Per GPU model (in `models`' order), 1 where the work confined to some models would
    need more than they have free on `layout` (`ModelDemand.scarcity`), else 0."""
    if mix.models.all():
        return np.zeros(len(models))  # no work is confined: no model is scarce
    index = {m: i for i, m in enumerate(models)}
    free = np.zeros(len(models))
    for nl in layout.nodes.values():
        free[index[nl.node.gpu_model or ""]] += sum(_free_milli(nl))
    return ModelDemand.of(mix).scarcity(free)


def _free_milli(nl: NodeLayout) -> list[int]:
    """Free thousandths of each GPU of the node (an unhealthy GPU has none to give)."""
    return [round((1 - slot.used) * MILLI) if nl.healthy(i) else 0 for i, slot in enumerate(nl.slots)]


def placement_costs(s: Scenario, layout: Layout, mix: WorkloadMix, options: list[tuple[Job, str, int | None]],
                    spare: dict | None = None, models: list[str] | None = None,
                    scarce: np.ndarray | None = None) -> list[float]:
    """The cost of one replica of each (job, node, GPU for a fraction) option, in GPUs.
    `spare`: free CPUs and memory per node (default: as the running jobs leave them);
    `models`: `gpu_models(s)`, when the caller has it; `scarce`: `model_scarcity` (default:
    on `layout`)."""
    if not options:
        return []
    models = models or gpu_models(s)
    index = {m: i for i, m in enumerate(models)}
    scarce = model_scarcity(layout, mix, models) if scarce is None else scarce
    spare = spare if spare is not None else spare_resources(s, {j.name for j in s.jobs if j.is_running})
    width = max(len(layout.nodes[node].slots) for _, node, _ in options) or 1
    free_of: dict[str, np.ndarray] = {}  # node -> free thousandths per GPU (unhealthy: 0)
    before, after, cpu, mem, model = [], [], [], [], []
    for job, node, gpu in options:
        nl = layout.nodes[node]
        if node not in free_of:
            free_of[node] = np.array(_free_milli(nl) + [0] * (width - len(nl.slots)))
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
    taken = np.zeros(len(options))
    if scarce.any():
        for k, (job, _node, _gpu) in enumerate(options):
            allowed = np.array([not job.gpu_model or m in job.gpu_model for m in models])
            taken[k] = displaced(allowed, scarce, model_ix[k:k + 1], _milli(job) * _gpu_count(job))[0]
    return (placement_cost(grow, free_after.sum(axis=1), displaced=taken) / MILLI).tolist()


def _gpu_count(j: Job) -> int:
    return 1 if j.is_fractional else int(j.gpus)


def _milli(j: Job) -> int:
    return round(j.gpus * MILLI) if j.is_fractional else MILLI


Price = Callable[[Job, str], float]


def pack(s: Scenario, layout: Layout, jobs: list[tuple[Job, list]], nodes: dict, mix: WorkloadMix | None,
         price: Price | None = None) -> dict[str, list[Placement] | None]:
    """Place whole-GPU `jobs` on `layout` (which it updates), greedily.

    `jobs`: (job, the key into `nodes` for each replica); `nodes`: key -> node names a
    replica may use. Largest jobs first; each replica goes, among nodes with room, to one
    already in use before an empty one, then to the lowest `price(job, node)` (default:
    the expected-fragmentation price), then the earliest in `nodes` among the nodes that
    have been in their state longest. Nodes in one state
    (free GPUs, their use, model, spare CPUs and memory) cost the same, so each state is
    priced once per job and the work grows with states, not nodes.
    Returns per job its placements, or None when a replica found no room (then none of
    its replicas stays placed).
    """
    spare = spare_resources(s, {j.name for j in s.jobs if j.is_running})
    cost = price or _state_price(s, layout, mix, spare)
    groups = _StateGroups(layout, nodes, spare)
    out: dict[str, list[Placement] | None] = {}
    for job, keys in sorted(jobs, key=lambda jk: -jk[0].gpus):
        mine: list[Placement] | None = []
        for key in keys:
            node = groups.best(key, job, cost)
            if node is None:
                for p in mine:
                    layout.release(p.node, job.name)
                    groups.update(p.node)
                layout.indices.pop(job.name, None)
                layout.hosts.pop(job.name, None)
                mine = None
                break
            mine.append(Placement(node, job.gpus, place(layout, job, node)))
            groups.update(node)
        out[job.name] = mine
    return out


class _StateGroups:
    """Nodes grouped by state, per key, in their order in `nodes`."""

    def __init__(self, layout: Layout, nodes: dict, spare: dict):
        self.layout, self.spare = layout, spare
        self.position = {}
        self.keys_of: dict[str, list] = defaultdict(list)
        self.groups: dict = defaultdict(lambda: defaultdict(dict))
        self.state_of = {}
        for key, names in nodes.items():
            for n in names:
                self.position.setdefault(n, len(self.position))
                self.keys_of[n].append(key)
        for n in self.position:
            self._add(n)

    def _state(self, node: str) -> tuple:
        nl = self.layout.nodes[node]
        used = tuple(round(sl.used, 6) if nl.healthy(i) else 1.0 for i, sl in enumerate(nl.slots))
        return (len(nl.free_indices()), used, nl.node.gpu_model, tuple(sorted(self.spare[node].items())))

    def _add(self, node: str) -> None:
        state = self.state_of[node] = self._state(node)
        for key in self.keys_of[node]:
            self.groups[key][state][node] = None

    def update(self, node: str) -> None:
        for key in self.keys_of[node]:
            del self.groups[key][self.state_of[node]][node]
        self._add(node)

    def best(self, key, job: Job, cost: Price) -> str | None:
        best = None
        for state, members in self.groups[key].items():
            if not members or state[0] < job.gpus:
                continue
            node = next(iter(members))
            rank = (all(u == 0 for u in state[1]), cost(job, node), self.position[node])
            if best is None or rank < best[0]:
                best = (rank, node)
        return None if best is None else best[1]


def _state_price(s: Scenario, layout: Layout, mix: WorkloadMix | None, spare: dict) -> Price:
    memo: dict = {}
    models = gpu_models(s)
    scarce = model_scarcity(layout, mix, models) if mix is not None else None

    def price(job: Job, node: str) -> float:
        if mix is None:
            return 0.0
        nl = layout.nodes[node]
        key = (job.gpus, job.cpu, job.memory_gib, tuple(job.gpu_model or ()), nl.node.gpu_model,
               tuple(round(sl.used, 6) for sl in nl.slots), tuple(sorted(spare[node].items())))
        if key not in memo:
            memo[key] = placement_costs(s, layout, mix, [(job, node, None)], spare, models, scarce)[0]
        return memo[key]

    return price
