"""What the program decides over: which running jobs it may preempt or move, which
waiting jobs it may start, and which nodes it sees one by one.

Small clusters (at most `exact_nodes` nodes) are decided whole: every node gets its
own variables, every legal victim and every preemptible job is a candidate, so plans
are exactly optimal. On larger clusters a greedy pass, in the order jobs would start,
reserves free GPUs for each waiting job and, for the work free GPUs cannot serve, the
cheapest nodes to reclaim: on those *reclaim nodes* the program chooses how many of the
node's victims go, in victim order (`cuts`). Nodes with room for fractions or with CPUs
or memory that could run short are *detailed*: they get their own variables, as on
small clusters. Every other node is *pooled*: its running jobs stay as they are. On
pooled and reclaim nodes only the count of free GPUs matters, in one capacity row per job
size (docs/policy.md, "Keeping the program small"). Everything here is computed once per
node, queue or shape, never per pair of job and node.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpu_policy.model import Job, Scenario
from gpu_policy.planner import rules
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.consolidation import Consolidation, Consolidations
from gpu_policy.planner.layout import Layout, spare_resources
from gpu_policy.planner.shapes import Eligible, Shape, node_kind, scenario_constraints, shape_of
from gpu_policy.planner.telemetry import GpuLimits


@dataclass
class Standing:
    """The state before the plan, in the numbers the rules use."""

    tree: rules.QueueTree
    shares: rules.Shares
    held: dict[str, float]              # GPUs each entity holds
    held_nonpreemptible: dict[str, float]


@dataclass
class Scope:
    exact: bool
    detailed: list[str]                        # nodes with their own variables, in cluster order
    pools: dict[object, list[str]]             # pool key (`_pool_key`) -> pooled nodes (free GPUs counted per size)
    victims: list[Job]                         # running jobs on detailed nodes the plan may preempt
    movers: list[Job]                          # running jobs the plan may move
    waiting: list[Job]                         # waiting jobs the plan may start, in start order
    fraction_gpus: dict[str, list[int]] = field(default_factory=dict)  # node -> GPUs open to new fractions
    givers: dict[str, set[str]] = field(default_factory=dict)  # receiving queue -> queues it may reclaim from
    cuts: dict[str, list[Job]] = field(default_factory=dict)  # reclaim node -> its victims, first to go first


def scope(s: Scenario, layout: Layout, st: Standing, waiting: list[Job], cfg: PlannerConfig,
          limits: GpuLimits, detail: set[str] = frozenset()) -> Scope:
    """`waiting`: the jobs that could ever start, in start order (rules.start_order);
    `detail`: nodes that always get their own variables (composable nodes)."""
    givers = _givers(st, waiting)
    running = [j for j in s.jobs if j.is_running]
    top: dict[str, Job] = {}  # each queue's highest-priority waiting job
    for job in waiting:
        if job.queue not in top or job.priority > top[job.queue].priority:
            top[job.queue] = job
    legal = [j for j in running if _may_be_victim(j, top.get(j.queue), givers)]
    movable = [j for j in running if j.is_preemptible] if cfg.max_moves > 0 and waiting else []
    if len(s.nodes) <= cfg.exact_nodes:
        fractions = sum(j.replicas for j in waiting + movable if j.is_fractional)
        return Scope(True, [n.name for n in s.nodes], {}, legal, movable, waiting,
                     _fraction_gpus(layout, [n.name for n in s.nodes], fractions, legal, movable), givers)
    return _greedy_scope(s, layout, st, waiting, cfg, limits, givers, legal, movable, detail)


def _givers(st: Standing, waiting: list[Job]) -> dict[str, set[str]]:
    """For each queue with waiting work, the queues it may ever reclaim from (judged on the
    state before the plan with its smallest waiting job: a necessary condition)."""
    smallest: dict[str, float] = {}
    for job in waiting:
        smallest[job.queue] = min(smallest.get(job.queue, job.total_gpus), job.total_gpus)
    return {r: {g for g in st.tree.leaves if rules.reclaim_tiers(st.tree, st.shares, st.held, r, g, gpus)}
            for r, gpus in smallest.items()}


def _may_be_victim(job: Job, top: Job | None, givers: dict[str, set[str]]) -> bool:
    """Could the rules ever let `job` go: for another queue, or for `top`, the
    highest-priority waiting job of its own queue?"""
    if not job.is_preemptible:
        return False
    return any(job.queue in mine for mine in givers.values()) or (
        top is not None and rules.may_preempt_inside(job, top))


def _fraction_gpus(layout: Layout, nodes: list[str], items: int, victims: list[Job], movers: list[Job]
                   ) -> dict[str, list[int]]:
    """GPUs that may receive new fractions: shared ones, ones held by jobs that may leave,
    and free ones, at most `items` per node (free GPUs of a node are interchangeable)."""
    if not items:
        return {}
    leaving = {j.name for j in victims} | {j.name for j in movers}
    out = {}
    for n in nodes:
        nl = layout.nodes[n]
        gpus, free = [], 0
        for i, slot in enumerate(nl.slots):
            if not nl.healthy(i) or (slot.whole and slot.whole not in leaving):
                continue
            if slot.free:
                free += 1
                if free > items:
                    continue
            gpus.append(i)
        if gpus:
            out[n] = gpus
    return out


class _FreeIndex:
    """Nodes by GPU model and number of free GPUs, for best-fit lookups in O(GPUs per node);
    only nodes whose placement constraints admit the shape are found."""

    def __init__(self, s: Scenario, free: dict[str, int]):
        self.eligible = Eligible(s.nodes)
        self.free = dict(free)
        self.model = {n.name: n.gpu_model for n in s.nodes}
        self.top = max((n.gpus for n in s.nodes), default=0)
        self.buckets: dict[tuple, dict[str, None]] = defaultdict(dict)
        for n in s.nodes:
            self.buckets[n.gpu_model, self.free[n.name]][n.name] = None

    def set(self, node: str, free: int) -> None:
        del self.buckets[self.model[node], self.free[node]][node]
        self.free[node] = free
        self.buckets[self.model[node], free][node] = None

    def allows(self, shape: Shape, node: str) -> bool:
        return self.eligible.allows(shape, node)

    def best_fit(self, shape: Shape, need: int, ok) -> str | None:
        """The first node, fewest free GPUs first, with `need` free, of a model the shape
        accepts, that its placement constraints and `ok(node)` admit."""
        models = {m for m, _ in self.buckets} if shape.models is None else set(shape.models)
        allowed = self.eligible.names(shape.constraints)
        for f in range(need, self.top + 1):
            for m in sorted(models, key=str):
                for node in self.buckets.get((m, f), ()):
                    if (allowed is None or node in allowed) and ok(node):
                        return node
        return None


def _greedy_scope(s: Scenario, layout: Layout, st: Standing, waiting: list[Job], cfg: PlannerConfig,
                  limits: GpuLimits, givers: dict[str, set[str]], legal: list[Job], movable: list[Job],
                  detail: set[str]) -> Scope:
    nodes = {n.name: n for n in s.nodes}
    free = {n: len(nl.free_indices()) for n, nl in layout.nodes.items()}
    spare = spare_resources(s, {j.name for j in s.jobs if j.is_running})
    safe = _pool_safe(s, free, spare, waiting)
    index = _FreeIndex(s, free)
    detailed: set[str] = set()
    fraction_gpus: dict[str, set[int]] = defaultdict(set)
    idle = {j.name for j in legal if rules.idle_victim(j, limits.idle_jobs, st.held, st.shares.fair)}
    rankings = _ReclaimRankings(s, layout, legal, cfg, idle)
    used_for_reclaim: set[str] = set()
    consolidations = Consolidations(movable, cfg)
    consolidated: set[str] = set()
    moves_left = cfg.max_moves
    opened: list[list] = []  # [room, node, gpu] of GPUs virtually holding fractions, best fit first
    shared = sorted((1 - sl.used, n, i) for n, nl in layout.nodes.items() for i, sl in enumerate(nl.slots)
                    if nl.healthy(i) and sl.fractions and not sl.whole and rules.has_room(sl.used))
    opened.extend([list(x) for x in shared])

    def cpu_ok(job: Job):
        def ok(node: str) -> bool:
            room = spare[node]
            return all(room.get(r, float("inf")) + rules.EPS >= (getattr(job, r) or 0) for r in ("cpu", "memory_gib"))
        return ok

    def consolidate(found: Consolidation, job: Job, need: int) -> int:
        """Reserve a consolidation node for a replica of `job`, its movers their
        destinations, and detail them all; the number of moves."""
        index.set(found.node, index.free[found.node] + found.gathered - need)
        _take(spare[found.node], job)
        for name, dest in found.destinations.items():
            mover = consolidations.job(name)
            index.set(dest, index.free[dest] - int(mover.gpus))
            _take(spare[dest], mover)
            _take(spare[found.node], mover, -1)
        consolidated.add(found.node)
        detailed.add(found.node)
        detailed.update(found.destinations.values())
        return len(found.destinations)

    for job in waiting:
        shape = shape_of(job)
        for _ in range(job.replicas):
            if shape.fractional:
                spot = next((x for x in opened if rules.fits_on_gpu(1 - x[0], job.gpus)
                             and shape.fits_model(nodes[x[1]])
                             and index.allows(shape, x[1]) and limits.room_for_fraction(x[1], x[2], job.gpus)),
                            None)
                if spot is None:
                    node = index.best_fit(shape, 1, cpu_ok(job))
                    nl = layout.nodes[node] if node is not None else None
                    # a free GPU, else (the node's free GPUs being virtual: victims') one held whole
                    gpus = [] if nl is None else (
                        [i for i in nl.free_indices() if i not in fraction_gpus[node]]
                        or [i for i, sl in enumerate(nl.slots) if nl.healthy(i) and sl.whole
                            and i not in fraction_gpus[node]])
                    if gpus:
                        spot = [1.0, node, gpus[0]]
                        opened.append(spot)
                        index.set(node, index.free[node] - 1)
                if spot is not None:
                    spot[0] -= job.gpus
                    opened.sort()
                    detailed.add(spot[1])
                    fraction_gpus[spot[1]].add(spot[2])
                    continue
                need = 1
            else:
                need = shape.whole_gpus
                node = index.best_fit(shape, need, cpu_ok(job))
                if node is not None:
                    index.set(node, index.free[node] - need)
                    _take(spare[node], job)
                    if not safe[node]:
                        detailed.add(node)
                    continue
                # moves before preemption: a node where moving a few jobs out gathers the block
                found = consolidations.find(shape, need, index, used_for_reclaim | consolidated, moves_left, cpu_ok)
                if found is not None and cpu_ok(job)(found.node):
                    moves_left -= consolidate(found, job, need)
                    continue
            mine = givers.get(job.queue, set())
            chosen = rankings.nodes(job, need, mine, used_for_reclaim | consolidated, cfg.candidate_nodes_per_job,
                                    index.eligible.names(shape.constraints))
            if not chosen and not shape.fractional:
                # neither moves nor reclaim alone: a node where free GPUs, legal victims and movers do
                found = consolidations.find_beside_victims(
                    shape, need, index, used_for_reclaim | consolidated, moves_left, cpu_ok,
                    rankings.victims(job, mine), rankings.key(job, mine))
                if found is not None and cpu_ok(job)(found.node):
                    moves_left -= consolidate(found, job, need)
                    continue
            for k, node in enumerate(chosen):
                used_for_reclaim.add(node)
                if k == 0:  # the cheapest reclaim node is reserved for this replica
                    index.set(node, max(0, index.free[node] + rankings.freed(node, job, mine) - need))
    # a pooled node's cut takes victims of one replica only: a reclaim node with a gang victim is
    # detailed (with the gang's other nodes, below), so the program may take the gang
    detailed |= {n for n in used_for_reclaim if not safe[n] or rankings.holds_gang(n)}
    detailed |= detail  # composable nodes: their own variables, whatever the greedy pass chose
    _close_over_gangs(s, legal, movable, detailed)
    order = [n.name for n in s.nodes if n.name in detailed]
    on_detailed = lambda j: set(j.running) <= detailed  # noqa: E731
    cuts = {n: rankings.cut(n) for n in (n.name for n in s.nodes) if n in used_for_reclaim and n not in detailed}
    pools: dict[object, list[str]] = defaultdict(list)
    constraints = scenario_constraints(s)
    for n in s.nodes:
        if n.name not in detailed and not n.shared and not n.mig and safe[n.name] and (free[n.name] > 0 or cuts.get(n.name)):
            pools[_pool_key(n, constraints)].append(n.name)
    victims = [j for j in legal if on_detailed(j)]
    movers = [j for j in movable if on_detailed(j)]
    fractions = sum(j.replicas for j in waiting + movers if j.is_fractional)
    gpus = _fraction_gpus(layout, order, fractions, victims, movers) if fractions else {}
    for n in list(gpus):  # on large clusters only the GPUs the greedy pass chose, and those that may empty
        keep = fraction_gpus.get(n, set()) | {i for i in gpus[n] if not layout.nodes[n].slots[i].free}
        gpus[n] = [i for i in gpus[n] if i in keep]
    return Scope(False, order, dict(pools), victims, movers, waiting, {n: g for n, g in gpus.items() if g}, givers,
                 {n: c for n, c in cuts.items() if c})


def _pool_key(n, constraints: frozenset | None) -> object:
    """Pooled nodes are counted together when every shape may use all or none of them: by
    GPU model, and where jobs have placement constraints or nodes taints, by the
    constraints they admit."""
    return n.gpu_model if constraints is None else (n.gpu_model, node_kind(n, constraints).admits)


def _take(spare: dict[str, float], job: Job, sign: int = 1) -> None:
    """One replica of `job` takes (sign -1: gives back) its CPUs and memory on a node."""
    for r in ("cpu", "memory_gib"):
        if r in spare:
            spare[r] -= sign * (getattr(job, r) or 0)


def _pool_safe(s: Scenario, free: dict[str, int], spare: dict, waiting: list[Job]) -> dict[str, bool]:
    """Nodes whose free CPUs and memory hold any mix of waiting whole-GPU jobs that fits
    their free GPUs: only their GPUs need counting."""
    per_gpu = {r: max((((getattr(j, r) or 0) / j.gpus) for j in waiting if not j.is_fractional), default=0.0)
               for r in ("cpu", "memory_gib")}
    return {n.name: all(spare[n.name].get(r, float("inf")) + rules.EPS >= per_gpu[r] * free[n.name]
                        for r in ("cpu", "memory_gib")) for n in s.nodes}


def _close_over_gangs(s: Scenario, legal: list[Job], movable: list[Job], detailed: set[str]) -> None:
    """A candidate with replicas on several nodes frees GPUs on all of them: detail them all."""
    changed = True
    while changed:
        changed = False
        for j in legal + movable:
            if len(set(j.running)) > 1 and set(j.running) & detailed and not set(j.running) <= detailed:
                detailed.update(j.running)
                changed = True


class _ReclaimRankings:
    """Per node, the legal victims sorted cheapest first; per (victim set, size), the nodes
    where they free a block of that size, cheapest first. Built once, then looked up."""

    def __init__(self, s: Scenario, layout: Layout, legal: list[Job], cfg: PlannerConfig, idle: set[str]):
        """`idle`: the legal victims that are idle jobs of queues above their share (rules.idle_victim)."""
        self.layout, self.idle = layout, idle
        self.free = {n: len(nl.free_indices()) for n, nl in layout.nodes.items()}
        jobs = {j.name: j for j in legal}
        held: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for n, nl in layout.nodes.items():
            for i, slot in enumerate(nl.slots):
                if slot.whole in jobs and nl.healthy(i):
                    held[n][slot.whole] += 1
        self.lost = {j.name: rules.lost_work(j, cfg.default_checkpoint_age_s) for j in legal}
        self.on_node = {n: sorted(((jobs[v], g) for v, g in mine.items()),
                                  key=lambda x: rules.victim_order_key(x[0], self.lost[x[0].name], x[0].name in idle))
                        for n, mine in held.items()}
        self.memo: dict[tuple, dict[int, list[str]]] = {}
        self.legal_on_node: dict[tuple, dict[str, list[tuple[Job, int]]]] = {}
        self.cursor: dict[tuple, int] = {}

    @staticmethod
    def _legal(victim: Job, job: Job, givers: set[str]) -> bool:
        return victim.queue in givers or rules.may_preempt_inside(victim, job)

    def cut(self, node: str) -> list[Job]:
        """The node's victims of one replica, in the order they go (rules.victim_order_key)."""
        return [v for v, _ in self.on_node.get(node, ()) if len(v.running) == 1]

    def holds_gang(self, node: str) -> bool:
        """Whether a victim on the node has several replicas (which `cut` leaves out)."""
        return any(len(v.running) > 1 for v, _ in self.on_node.get(node, ()))

    def freed(self, node: str, job: Job, givers: set[str]) -> int:
        return sum(g for _, g in self.victims(job, givers).get(node, ()))

    @staticmethod
    def key(job: Job, givers: set[str]) -> tuple:
        """What decides which victims are legal for `job`."""
        return (frozenset(givers), job.queue, job.priority)

    def victims(self, job: Job, givers: set[str]) -> dict[str, list[tuple[Job, int]]]:
        """Per node, the victims legal for `job` and the GPUs each holds there."""
        key = self.key(job, givers)
        if key not in self.legal_on_node:
            self.legal_on_node[key] = {n: legal for n, mine in self.on_node.items()
                                       if (legal := [(v, g) for v, g in mine if self._legal(v, job, givers)])}
        return self.legal_on_node[key]

    def nodes(self, job: Job, need: int, givers: set[str], used: set[str], k: int,
              allowed: frozenset[str] | None = None) -> list[str]:
        """The `k` cheapest nodes not in `used`, among the `allowed` (None: all), where the
        victims legal for `job` free `need` GPUs usable by it: ranked by the highest victim tier
        taken (rules.victim_tier: idle jobs first, then the lowest priority), then the work the
        victims lose (rules.lost_work), then how many (as the program ranks victims). One pass
        over the nodes per (legal victims, queue, priority) ranks every size at once."""
        key = self.key(job, givers)
        if key not in self.memo:
            ranked: dict[int, list] = defaultdict(list)
            for node, mine in self.victims(job, givers).items():
                have, cost = self.free[node], ((0, 0), 0.0, 0)
                for v, g in mine:
                    before, have = have, have + g
                    tier = rules.victim_tier(v, v.name in self.idle)
                    cost = (max(cost[0], tier), cost[1] + self.lost[v.name], cost[2] + 1)
                    for size in range(before + 1, have + 1):
                        ranked[size].append((cost, node))
            self.memo[key] = {size: [n for _, n in sorted(nodes)] for size, nodes in ranked.items()}
        ranking = self.memo[key].get(need, [])
        start = self.cursor.get((key, need), 0)
        while start < len(ranking) and ranking[start] in used:
            start += 1
        self.cursor[key, need] = start
        out = []
        for node in ranking[start:]:
            if len(out) == k:
                break
            if node not in used and (allowed is None or node in allowed):
                out.append(node)
        return out
