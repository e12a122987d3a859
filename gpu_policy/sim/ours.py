"""gpu-policy's own placement in the simulator: an integer program over the best
candidate placements of the arriving pods, priced by `placement_cost`.

Online, each pod is one plan; batched, a window of arriving pods is one plan,
which may place them in any order and drops a pod it cannot place. Two stages,
as in the planner: first place as much GPU capacity as possible (every pod
counts at least one thousandth, so CPU-only pods are placed too), then, keeping
that, the least cost. The decisions are the simulator's own; what a node and a GPU
hold is the planner's rule, and `gpu_policy.planner.rules.capacity` writes those rows.
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from dataclasses import dataclass
from functools import partial

import numpy as np
import pulp

from gpu_policy.packing.fragmentation import MILLI
from gpu_policy.packing.price import BEST_FIT_WEIGHT, CAPACITY_WEIGHT, displaced, packing_fragmentation, placement_cost
from gpu_policy.planner.rules.capacity import Room, gpu_room, node_gpus_room, node_room
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.program import Program, affine
from gpu_policy.planner.core.solve import solve_stages
from gpu_policy.sim.cluster import Placement, SimCluster, is_share
from gpu_policy.sim.policies import Policy, pick


@dataclass(frozen=True)
class Price:
    """The packing price's weights (`gpu_policy.packing.price`); the defaults ship."""
    capacity_weight: float = CAPACITY_WEIGHT
    best_fit_weight: float = BEST_FIT_WEIGHT
    model_scarcity: bool = True

    def measure(self):
        return partial(packing_fragmentation, capacity_weight=self.capacity_weight)

    def of(self, cluster: SimCluster, t: int) -> tuple[np.ndarray, np.ndarray]:
        """What placing a pod of type t costs on every node (inf where it does not fit),
        and for shares the free level of the GPU to use. `cluster` measures by `measure`."""
        growth, level = cluster.fragmentation_delta(t)
        asked = cluster.types[t].gpu_milli
        taken = 0.0
        if self.model_scarcity:
            scarce = cluster.model_demand.scarcity(cluster.free_by_model())
            taken = displaced(cluster.allowed_models(t), scarce, cluster.model, asked)
        return placement_cost(growth, cluster.free.sum(axis=1) - asked, self.best_fit_weight, taken), level


class OursPolicy(Policy):
    """`candidates` cheapest nodes per pod (4: within 0.15 points of 8 on openb, and
    faster; docs/benchmarks.md); `solver` as in the planner, HiGHS where highspy
    is installed: it solves in-process, where CBC starts a process per plan."""

    def __init__(self, batched: bool, candidates: int = 4, solver: str | None = None, price: Price = Price()):
        self.batched = batched
        self.name = "ours-batched" if batched else "ours-online"
        self.candidates = candidates
        self.config = PlannerConfig(solver=solver or default_solver())
        self.price = price
        self.measure = price.measure()

    def place_one(self, cluster: SimCluster, t: int, rng: np.random.Generator) -> Placement | None:
        return self.place_window(cluster, [t], rng)[0]

    def place_window(self, cluster, window, rng):
        options = self._window_options(cluster, window)
        placed: list[Placement | None] = [None] * len(window)
        if any(options):
            m = _window_program(cluster, window, options)
            solve_stages(m, self.config)
            for (p, c), var in m.x.items():
                if round(var.varValue or 0) == 1:
                    placed[p] = options[p][c][0]
        # shares first: whole-GPU pods then take whole GPUs the shares did not open
        for p in sorted(range(len(window)), key=lambda p: not is_share(cluster.types[window[p]])):
            where = placed[p]
            if where is not None:
                if not is_share(cluster.types[window[p]]):
                    where = placed[p] = Placement(where.node, cluster.gpus_for(window[p], where.node))
                cluster.place(window[p], where)
        return placed

    def _window_options(self, cluster: SimCluster, window: list[int]) -> list[list[tuple[Placement, float]]]:
        """Each pod's cheapest placements, judged after the pods before it in the
        window took their cheapest: so placing the window in arrival order, each
        pod where it costs least, is always among the program's solutions."""
        if len(window) == 1:
            return [self._options(cluster, window[0])]
        trial = cluster.scratch()
        options = []
        for t in window:
            mine = self._options(trial, t)
            options.append(mine)
            if mine:
                trial.place(t, mine[0][0])
        return options

    def _options(self, cluster: SimCluster, t: int) -> list[tuple[Placement, float]]:
        """The cheapest placements of one pod on the cluster as it is, with their costs."""
        cost, level = self.price.of(cluster, t)
        fits = np.flatnonzero(np.isfinite(cost))
        best = fits[np.argsort(cost[fits], kind="stable")[:self.candidates]]
        return [(Placement(int(n), cluster.gpus_for(t, int(n), int(level[n]))), float(cost[n])) for n in best]


class CheapestPolicy(Policy):
    """Each pod where the packing price is least: ours-online without the program (the
    same choice, ties aside), fast enough to sweep the price's weights (bench/)."""
    name = "cheapest"

    def __init__(self, price: Price = Price()):
        self.price = price
        self.measure = price.measure()

    def place_one(self, cluster, t, rng):
        cost, level = self.price.of(cluster, t)
        node = pick(cost, rng)
        return None if node is None else Placement(node, cluster.gpus_for(t, node, int(level[node])))


def default_solver() -> str:
    return "highs" if importlib.util.find_spec("highspy") else "cbc"


def _window_program(cluster: SimCluster, window: list[int], options: list[list[tuple[Placement, float]]]) -> Program:
    """x[p, c] = 1 if pod p takes its c-th option, each pod at most one. Two stages: the
    most GPU capacity placed, then the least cost. What a node and a GPU hold is the
    planner's rule (`gpu_policy.planner.rules.capacity`), which writes the capacity rows."""
    m = Program(pulp.LpProblem("window", pulp.LpMinimize))
    value, cost = {}, {}
    per_node: dict[int, list[tuple[int, pulp.LpVariable, Placement]]] = defaultdict(list)
    for p, opts in enumerate(options):
        for c, (where, price) in enumerate(opts):
            var = m.x[p, c] = m.prob.add_variable(f"x_{p}_{c}", cat="Binary")
            value[var] = -(cluster.types[window[p]].gpu_milli + 1)
            cost[var] = price
            per_node[where.node].append((window[p], var, where))
        m.prob += affine({m.x[p, c]: 1 for c in range(len(opts))}) <= 1, f"once_{p}"
    for n, uses in per_node.items():
        if len(uses) > 1:  # one option alone always fits
            _node_rows(m.prob, cluster, n, uses)
    m.stages = [("placed", affine(value)), ("cost", affine(cost))]
    return m


def _node_rows(prob: pulp.LpProblem, cluster: SimCluster, n: int,
               uses: list[tuple[int, pulp.LpVariable, Placement]]) -> None:
    """Node n's capacity rows over the options placed there, in thousandths of a GPU for
    shares: CPU, memory, each GPU's shares (a free GPU opened for them), and its free GPUs
    (taken whole, or opened for shares)."""
    types = cluster.types
    _add(prob, node_room({v: types[t].cpu for t, v, _ in uses}, 0.0, cluster.cpu[n]), f"cpu_{n}")
    _add(prob, node_room({v: types[t].memory for t, v, _ in uses}, 0.0, cluster.memory[n]), f"mem_{n}")
    shares: dict[int, dict] = defaultdict(dict)
    for t, v, where in uses:
        if is_share(types[t]):
            shares[where.gpus[0]][v] = types[t].milli
    opened = []
    for g, terms in shares.items():
        free = int(cluster.free[n, g])
        if free >= MILLI:
            opened.append(prob.add_variable(f"open_{n}_{g}", cat="Binary"))
            _add(prob, gpu_room(terms, opened=opened[-1], one=MILLI), f"share_{n}_{g}")
        else:
            _add(prob, gpu_room(terms, held=MILLI - free, one=MILLI), f"share_{n}_{g}")
    whole = {v: types[t].gpus for t, v, _ in uses if types[t].gpus and not is_share(types[t])}
    if whole or opened:
        _add(prob, node_gpus_room(whole, opened, 0, int((cluster.free[n] >= MILLI).sum())), f"whole_{n}")


def _add(prob: pulp.LpProblem, room: Room, name: str) -> None:
    """A capacity row the placement rule wrote, over the window's variables."""
    prob += room.constraint(), name
