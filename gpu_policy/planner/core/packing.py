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
from collections.abc import Mapping
from typing import Callable

import numpy as np

from gpu_policy.model import Job, Scenario
from gpu_policy.packing import MILLI, ModelDemand, WorkloadMix, displaced, packing_fragmentation, placement_cost
from gpu_policy.model.plan import Placement
from gpu_policy.model.layout import Layout, NodeLayout, place, spare_resources

#: Stands in for the CPU or memory of a node that does not declare it.
UNLIMITED = 1e12


def scenario_mix(s: Scenario) -> WorkloadMix | None:
    """The jobs of the scenario as the expected workload (None: no jobs, nothing to price)."""
    if not s.jobs:
        return None
    asks = Counter((j.cpu, j.memory_gib, j.gpus, j.is_fractional, frozenset(j.gpu_model) if j.gpu_model else None)
                   for j in s.jobs)
    kinds: Counter = Counter()  # in the order each kind first appears among the jobs
    for (cpu, memory_gib, gpus, fractional, models), count in asks.items():
        kinds[(cpu or 0.0, memory_gib or 0.0, _gpu_count(gpus, fractional), _milli(gpus, fractional), models)] += count
    return WorkloadMix.build(list(kinds), list(kinds.values()), gpu_models(s))


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
    spare = spare if spare is not None else spare_resources(s)
    width = max(len(layout.nodes[node].slots) for _, node, _ in options) or 1
    free_of: dict[str, np.ndarray] = {}  # node -> free thousandths per GPU (unhealthy: 0)
    before, after, cpu, mem, model = [], [], [], [], []
    for job, node, gpu in options:
        nl = layout.nodes[node]
        if node not in free_of:
            free_of[node] = np.array(_free_milli(nl) + [0] * (width - len(nl.slots)))
        free = free_of[node].copy()
        if gpu is not None:
            free[gpu] -= _milli(job.gpus, job.is_fractional)
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
    taken = _taken_from_scarce(options, models, scarce, model_ix)
    return (placement_cost(grow, free_after.sum(axis=1), displaced=taken) / MILLI).tolist()


def _taken_from_scarce(options: list[tuple[Job, str, int | None]], models: list[str], scarce: np.ndarray,
                       model_ix: np.ndarray) -> np.ndarray:
    """Per option, the GPU thousandths it takes from work confined to scarce models (`displaced`)."""
    taken = np.zeros(len(options))
    if scarce.any():
        for k, (job, _node, _gpu) in enumerate(options):
            allowed = np.array([not job.gpu_model or m in job.gpu_model for m in models])
            asked = _milli(job.gpus, job.is_fractional) * _gpu_count(job.gpus, job.is_fractional)
            taken[k] = displaced(allowed, scarce, model_ix[k:k + 1], asked)[0]
    return taken


def _gpu_count(gpus: float, fractional: bool) -> int:
    """GPUs a replica asking for `gpus` takes a part of (a fraction's is one)."""
    return 1 if fractional else int(gpus)


def _milli(gpus: float, fractional: bool) -> int:
    """Thousandths of each of those GPUs it takes."""
    return round(gpus * MILLI) if fractional else MILLI


Price = Callable[[Job, str], float]
#: Prices of one replica of a job on each of some (node state, node) pairs (`_StateGroups`).
Prices = Callable[[Job, list[tuple[int, str]]], list[float]]


def pack(s: Scenario, layout: Layout, jobs: list[tuple[Job, list]], nodes: dict, mix: WorkloadMix | None,
         price: Price | None = None, prefer: Mapping[str, float] | None = None) -> dict[str, list[Placement] | None]:
    """Place whole-GPU `jobs` on `layout` (which it updates), greedily.

    `jobs`: (job, the key into `nodes` for each replica); `nodes`: key -> node names a
    replica may use. Largest jobs first; each replica goes, among nodes with room, to the
    lowest `prefer[node]` (None: all alike; the topology's fullest domains), then to one
    already in use before an empty one, then to the lowest `price(job, node)` (default:
    the expected-fragmentation price), then the earliest in `nodes` among the nodes that
    have been in their state longest. Nodes in one state
    (free GPUs, their use, model, spare CPUs and memory, preference) cost the same, so each
    state is priced once per job (the default price once per kind of job) and the work grows
    with states, not nodes.
    Returns per job its placements, or None when a replica found no room (then none of
    its replicas stays placed).
    """
    spare = spare_resources(s)
    groups = _StateGroups(layout, nodes, spare, prefer or {})
    costs: Prices = (_StatePrices(s, layout, mix, spare) if price is None
                     else lambda job, candidates: [price(job, n) for _, n in candidates])
    out: dict[str, list[Placement] | None] = {}
    for job, keys in sorted(jobs, key=lambda jk: -jk[0].gpus):
        mine: list[Placement] | None = []
        for key in keys:
            node = groups.best(key, job, costs)
            if node is None:
                _unplace(layout, groups, job, mine)
                mine = None
                break
            mine.append(Placement(node, job.gpus, place(layout, job, node)))
            groups.update(node)
        out[job.name] = mine
    return out


def _unplace(layout: Layout, groups: _StateGroups, job: Job, placed: list[Placement]) -> None:
    """Take the replicas of `job` placed so far off `layout` again."""
    for p in placed:
        layout.release(p.node, job.name)
        groups.update(p.node, freed=True)
    layout.indices.pop(job.name, None)
    layout.hosts.pop(job.name, None)


class _StateGroups:
    """Nodes grouped by preference and state, per key, in their order in `nodes`. A state is
    (free GPUs, each GPU's use (an unhealthy one counts as used), model, spare CPUs and
    memory), known by its number: `ids` numbers each state met, and per number `free` holds
    its free GPUs and `empty` whether the state's nodes have nothing on their GPUs."""

    def __init__(self, layout: Layout, nodes: dict, spare: dict, prefer: Mapping[str, float]):
        self.layout = layout
        self.prefer = prefer
        self.position: dict[str, int] = {}
        self.keys_of: dict[str, list] = defaultdict(list)
        #: key -> preference -> state number -> {node: None}, only states with nodes
        self.groups: dict = defaultdict(lambda: defaultdict(dict))
        self.ranks: dict = {}  # key -> its preferences, lowest first
        self.first: dict = {}  # (key, GPUs) -> the first of its ranks that may have room for them
        self.state_of: dict[str, int] = {}
        self.ids: dict[tuple, int] = {}
        self.free: list[int] = []
        self.empty: list[bool] = []
        for key, names in nodes.items():
            for n in names:
                self.position.setdefault(n, len(self.position))
                self.keys_of[n].append(key)
        # model and spare resources: packing changes neither
        self.fixed = {n: (layout.nodes[n].node.gpu_model, tuple(sorted(spare[n].items()))) for n in self.position}
        for n in self.position:
            self._add(n)

    def _state(self, node: str) -> int:
        nl = self.layout.nodes[node]
        bad = nl.node.unhealthy_gpus
        used = tuple([1.0 if i in bad else round(sl.used, 6) if sl.fractions else 1.0 if sl.whole else 0
                      for i, sl in enumerate(nl.slots)])
        free = len(nl.free_indices())
        state = self.ids.setdefault((free, used, self.fixed[node]), len(self.ids))
        if state == len(self.free):
            self.free.append(free)
            self.empty.append(all(u == 0 for u in used))
        return state

    def _add(self, node: str) -> None:
        state = self.state_of[node] = self._state(node)
        rank = self.prefer.get(node, 0.0)
        for key in self.keys_of[node]:
            self.groups[key][rank].setdefault(state, {})[node] = None

    def update(self, node: str, freed: bool = False) -> None:
        """`node` changed (`freed`: it has more free GPUs than before): move it to the group
        of its new state."""
        if freed:
            self.first.clear()
        state, rank = self.state_of[node], self.prefer.get(node, 0.0)
        for key in self.keys_of[node]:
            members = self.groups[key][rank][state]
            del members[node]
            if not members:
                del self.groups[key][rank][state]
        self._add(node)

    def best(self, key, job: Job, costs: Prices) -> str | None:
        """The node of `key` for one replica of `job`: the most preferred nodes with room;
        among them, a node in use before an empty one, then the lowest cost, then the
        earliest position (each state's candidate is the node in it longest)."""
        free, empty, position = self.free, self.empty, self.position
        if key not in self.ranks:  # the preferences are fixed: every node's is there from the start
            self.ranks[key] = sorted(self.groups[key])
        ranks = self.ranks[key]
        first = self.first.get((key, job.gpus), 0)
        for i in range(first, len(ranks)):
            candidates = [(state, next(iter(members))) for state, members in self.groups[key][ranks[i]].items()
                          if free[state] >= job.gpus]
            if candidates:
                self.first[key, job.gpus] = i  # the ranks before have no room for it, nor will they
                return min((empty[state], cost, position[node], node)
                           for (state, node), cost in zip(candidates, costs(job, candidates)))[3]
        self.first[key, job.gpus] = len(ranks)
        return None


class _StatePrices:
    """The expected-fragmentation price, remembered per kind of job and node state
    (`_StateGroups`); the states not priced yet are priced together."""

    def __init__(self, s: Scenario, layout: Layout, mix: WorkloadMix | None, spare: dict):
        self.s, self.layout, self.mix, self.spare = s, layout, mix, spare
        self.models = gpu_models(s)
        self.scarce = model_scarcity(layout, mix, self.models) if mix is not None else None
        self.memo: dict[tuple, dict[int, float]] = defaultdict(dict)  # kind of job -> state -> price

    def __call__(self, job: Job, candidates: list[tuple[int, str]]) -> list[float]:
        if self.mix is None:
            return [0.0] * len(candidates)
        memo = self.memo[(job.gpus, job.cpu, job.memory_gib, tuple(job.gpu_model or ()))]
        new = {state: n for state, n in candidates if state not in memo}
        if new:
            priced = placement_costs(self.s, self.layout, self.mix, [(job, n, None) for n in new.values()],
                                     self.spare, self.models, self.scarce)
            memo.update(zip(new, priced))
        return [memo[state] for state, _ in candidates]
