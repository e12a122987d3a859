"""Consolidation nodes on large clusters: where moving a few running jobs to other nodes
gathers a block of free GPUs for a waiting replica that no node's free GPUs hold.

The greedy scope pass (`gpu_policy.planner.core.scope`) asks for one before it looks for
nodes to reclaim, because the contract moves before it preempts. A consolidation node is
the node whose free GPUs, with those of the movers it gives up, hold the replica at the
least cost: the fewest GPUs moved, then the fewest moves, then the least lost work. Each
mover gets a destination: the best fit among the other nodes with free GPUs. The scope
details the node and the destinations, so the program decides the moves itself (or
something better) with its own variables; this module only chooses where to look.

When neither moves alone nor reclaim alone gathers the block, a *mixed* node may: its
free GPUs, the GPUs of its legal victims and those of a few movers that are not victims
(each with a destination) together hold the replica (`find_beside_victims`). The scope
details it and the destinations; the program chooses which victims go and which jobs
move, its stages preferring moves to preemptions.

Movers here are running whole-GPU jobs of one replica that may move. The work is bounded:
each node's cheapest sets of movers are computed once (a node holds a handful of jobs),
nodes are visited by free GPUs, fewest missing first, and a search that finds nothing is
not repeated for the same size and budget.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

from gpu_policy.model import Job
from gpu_policy.planner.core.shapes import Shape, shape_of

#: Most movers of one node that the search combines (a node of 8 GPUs holds at most 8).
_MOST_MOVERS_PER_NODE = 10
#: Sets of movers per node, and candidates in all, tried for destinations, cheapest first.
_OPTIONS_PER_NODE = 3
_TRIES = 16
#: Candidates that move exactly the GPUs missing after which the search stops visiting nodes.
_CANDIDATES = 64


@dataclass
class Consolidation:
    node: str
    gathered: int                    # GPUs the movers (and, on a mixed node, the victims) give up on `node`
    destinations: dict[str, str]     # mover -> the node it is expected to go to


def _room(index, excluded: set[str]) -> int:
    """The most free GPUs of any node not in `excluded`: a mover larger than that could go nowhere."""
    return max((f for (_, f), nodes in index.buckets.items() if any(n not in excluded for n in nodes)), default=0)


def _by_node(movable: list[Job]) -> dict[str, list[Job]]:
    """The movers of each node: running whole-GPU jobs of one replica that may move."""
    out: dict[str, list[Job]] = defaultdict(list)
    for job in movable:
        if job.replicas == 1 and not job.is_fractional:
            out[job.running[0]].append(job)
    return out


class Consolidations:
    """Cheapest consolidation nodes, looked up against the greedy pass's free GPUs (an
    index with `free`, `model` and `buckets[(model, free)]`, `best_fit` and `allows`, which
    says whether a shape's placement constraints admit a node)."""

    def __init__(self, movable: list[Job], max_moves: int, lost_work: Callable[[Job], float]):
        """`lost_work`: GPU-seconds moving a job loses (the victims rule's count)."""
        self.movable = movable
        self.running_on: dict[str, list[Job]] | None = None  # node -> its movers, in no order, once a search visits one
        self.lost_work = lost_work
        self.ranked: dict[str, list[Job]] = {}  # node -> its cheapest movers, once asked for
        self.lost: dict[str, float] = {}  # mover -> the work moving it loses, for the nodes ranked
        self.jobs: dict[str, Job] = {}  # the movers of the nodes ranked
        self.most_moves = max_moves
        self.cheapest: dict[tuple, list[tuple]] = {}  # (node, GPUs missing, room) -> [(cost, movers)]
        self.most: dict[tuple, int] = {}  # (node, budget, room) -> most GPUs its movers give up
        self.fruitless: set[tuple] = set()  # (models, need, budget) that found nothing

    def job(self, name: str) -> Job:
        return self.jobs[name]

    def movers(self, node: str) -> list[Job]:
        """The node's movers the search combines: the `_MOST_MOVERS_PER_NODE` smallest, then
        those losing least work (ranked when a search first visits the node)."""
        if node not in self.ranked:
            if self.running_on is None:
                self.running_on = _by_node(self.movable)
            mine = self.running_on.get(node, [])
            for j in mine:
                self.lost[j.name] = self.lost_work(j)
                self.jobs[j.name] = j
            self.ranked[node] = sorted(mine, key=lambda j: (j.gpus, self.lost[j.name], j.name))[:_MOST_MOVERS_PER_NODE]
        return self.ranked[node]

    def _most(self, node: str, budget: int, room: int) -> int:
        """Most GPUs `budget` movers of `node`, none larger than `room`, give up."""
        key = (node, budget, room)
        if key not in self.most:
            sizes = sorted((int(j.gpus) for j in self.movers(node) if j.gpus <= room), reverse=True)
            self.most[key] = sum(sizes[:budget])
        return self.most[key]

    def _options(self, node: str, missing: int, budget: int, room: int,
                 staying: frozenset[str] = frozenset()) -> list[tuple]:
        """Sets of at most `budget` movers of `node`, none larger than `room` (the most free
        GPUs any node has: a larger one could go nowhere) nor in `staying`, that give up >=
        `missing` GPUs, cheapest first: ((GPUs moved, moves, lost work), movers)."""
        key = (node, missing, room, staying)
        if key not in self.cheapest:
            mine = [j for j in self.movers(node) if j.gpus <= room and j.name not in staying]
            options = []
            for k in range(1, min(len(mine), self.most_moves) + 1):
                for group in combinations(mine, k):
                    gpus = sum(int(j.gpus) for j in group)
                    if gpus >= missing:
                        options.append(((gpus, k, sum(self.lost[j.name] for j in group)), list(group)))
            options.sort(key=lambda o: (o[0], [j.name for j in o[1]]))
            self.cheapest[key] = options[:_OPTIONS_PER_NODE]
        return [o for o in self.cheapest[key] if o[0][1] <= budget]

    def find(self, shape: Shape, need: int, index, excluded: set[str], budget: int,
             fits: Callable[[Job], Callable[[str], bool]], allowed: frozenset[str] | None = None
             ) -> Consolidation | None:
        """The cheapest node not in `excluded`, among `allowed` (None: any), where at most
        `budget` movers, each with a destination (another node with free GPUs that
        `fits(mover)` admits), gather `need` free GPUs for a replica of `shape`. Leaves
        `index` as it found it."""
        key = (shape.models, shape.constraints, need, budget, allowed)
        if key in self.fruitless or budget <= 0:
            return None
        room = _room(index, excluded)
        if room == 0:  # no GPU free anywhere a mover could go
            self.fruitless.add(key)
            return None
        models = {m for m, _ in index.buckets} if shape.models is None else set(shape.models)
        ranked = []
        best_gpus = None
        for free in range(need - 1, -1, -1):
            missing = need - free
            if best_gpus is not None and missing > best_gpus:
                break  # every node further on moves more GPUs
            exact = 0  # candidates that move no more than the GPUs missing: none can do better
            for model in sorted(models, key=str):
                for node in index.buckets.get((model, free), ()):
                    if exact >= _CANDIDATES:
                        break
                    if (node in excluded or (allowed is not None and node not in allowed)
                            or not index.allows(shape, node) or self._most(node, budget, room) < missing):
                        continue
                    for cost, group in self._options(node, missing, budget, room):
                        ranked.append((cost, node, group, cost[0]))
                        best_gpus = cost[0] if best_gpus is None else min(best_gpus, cost[0])
                        exact += cost[0] == missing
        return self._first_with_destinations(ranked, key, index, excluded, fits)

    def find_beside_victims(self, shape: Shape, need: int, index, excluded: set[str], budget: int,
                            fits: Callable[[Job], Callable[[str], bool]], victims: dict[str, list[tuple[Job, int]]],
                            memo_key: tuple, allowed: frozenset[str] | None = None) -> Consolidation | None:
        """The cheapest node not in `excluded` where free GPUs, the GPUs of its victims
        (`victims`: node -> [(victim legal for the replica, GPUs it holds there)]) and those
        of at most `budget` movers that are not victims, each with a destination, hold
        `need` GPUs; ranked by GPUs moved, moves, then GPUs of victims. `memo_key` names the
        victims' legality (a search that found nothing is not repeated for it); `allowed`:
        the nodes it may be (None: any)."""
        key = ("mixed", shape.models, shape.constraints, need, budget, memo_key, allowed)
        if key in self.fruitless or budget <= 0:
            return None
        room = _room(index, excluded)
        models = None if shape.models is None else set(shape.models)
        ranked = []
        for node, mine in victims.items():
            if node in excluded or (allowed is not None and node not in allowed) \
                    or (models is not None and index.model[node] not in models) or not index.allows(shape, node):
                continue
            victims_gpus = sum(g for _, g in mine)
            missing = need - index.free[node] - victims_gpus
            if missing <= 0 or room == 0 or self._most(node, budget, room) < missing:
                continue  # a reclaim node (searched before), or moves cannot make up the rest
            for cost, group in self._options(node, missing, budget, room, frozenset(v.name for v, _ in mine)):
                ranked.append(((cost[0], cost[1], victims_gpus, cost[2]), node, group, cost[0] + victims_gpus))
        return self._first_with_destinations(ranked, key, index, excluded, fits)

    def _first_with_destinations(self, ranked: list[tuple], key: tuple, index, excluded: set[str],
                                 fits: Callable[[Job], Callable[[str], bool]]) -> Consolidation | None:
        """Of `ranked` ((cost, node, movers, GPUs given up on the node)), the cheapest
        `_TRIES` in order, the first whose movers all find a destination; None (and `key`
        remembered as fruitless) if none does."""
        ranked.sort(key=lambda r: (r[0], r[1]))
        for _, node, group, gathered in ranked[:_TRIES]:
            destinations = self._destinations(node, group, index, excluded, fits)
            if destinations is not None:
                return Consolidation(node, gathered, destinations)
        self.fruitless.add(key)
        return None

    @staticmethod
    def _destinations(node: str, group: list[Job], index, excluded: set[str],
                      fits: Callable[[Job], Callable[[str], bool]]) -> dict[str, str] | None:
        """A best-fit destination for each mover, largest first, or None."""
        taken: list[tuple[str, int]] = []
        out: dict[str, str] = {}
        try:
            for job in sorted(group, key=lambda j: (-j.gpus, j.name)):
                ok = fits(job)
                dest = index.best_fit(shape_of(job), int(job.gpus),
                                      lambda n: n != node and n not in excluded and ok(n))
                if dest is None:
                    return None
                taken.append((dest, index.free[dest]))
                index.set(dest, index.free[dest] - int(job.gpus))
                out[job.name] = dest
            return out
        finally:
            for dest, free in reversed(taken):
                index.set(dest, free)
