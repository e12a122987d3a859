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
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

from gpu_policy.model import EPS, Job, Scenario
from gpu_policy.model.layout import Layout, fits_on_gpu, has_room, spare_resources
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.consolidation import Consolidation, Consolidations
from gpu_policy.planner.core.queues import QueueTree, Shares
from gpu_policy.planner.core.rankings import ReclaimRankings
from gpu_policy.planner.core.shapes import Apart, Eligible, Shape, node_kind, shape_of
from gpu_policy.planner.core.telemetry import GpuLimits


@dataclass
class Standing:
    """The state before the plan, in the numbers the rules use."""

    tree: QueueTree
    shares: Shares
    held: dict[str, float]              # GPUs each entity holds
    held_nonpreemptible: dict[str, float]


class ScopeRules(Protocol):
    """What the scope asks of the rules, all of them together in their order
    (`gpu_policy.planner.ruleset.RuleSet` answers): who may take from whom, and what each
    victim costs, as the program's preemption stages count it."""

    def givers(self, st: Standing, waiting: list[Job]) -> dict[str, set[str]]:
        """For each queue with waiting work, the queues it may ever take GPUs from."""

    def may_take(self, victim: Job, claimant: Job | None, givers: set[str]) -> bool:
        """Whether a start of `claimant` (None: any of another queue that may take from
        `givers`) may take the running `victim`'s GPUs."""

    def victim_key(self, job: Job) -> Hashable:
        """What `may_take` and `may_move` read of a victim: victims alike in it are judged by
        one of them."""

    def may_move(self, job: Job | None, claimant: Job | None) -> bool:
        """Whether the running `job` may be moved (None: any), for `claimant` (None: any)."""

    def victim_cost(self, victim: Job, st: Standing, limits: GpuLimits) -> tuple:
        """The cost of preempting `victim`, compared field by field."""

    def victim_order_key(self, victim: Job, cost: tuple) -> tuple:
        """Among valid victims, the order they go in (lowest first)."""

    def add_cost(self, total: tuple, cost: tuple) -> tuple:
        """The cost of a set of victims (`total`) with one more."""

    def lost_work(self, job: Job) -> float:
        """GPU-seconds of work preempting or moving `job` loses."""

    def apart(self) -> Apart:
        """What tells jobs alike apart for the rules (`shapes.shape_of`; None: nothing)."""

    def confine(self, job: Job) -> frozenset[str] | None:
        """The only nodes the waiting `job` may use (None: any); see `Rule.confine`."""

    def pool_group(self, node: str) -> Hashable:
        """What keeps a pooled node's GPUs apart from others alike (None: nothing); see `Rule.pool_group`."""


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
    apart: Apart = None                        # what tells jobs alike apart (`ScopeRules.apart`)
    confine: Callable[[Job], frozenset[str] | None] = lambda job: None  # `ScopeRules.confine`

    def shape(self, job: Job) -> Shape:
        """The shape the program places `job`'s replicas as."""
        return shape_of(job, self.apart)


def scope(s: Scenario, layout: Layout, st: Standing, waiting: list[Job], cfg: PlannerConfig,
          limits: GpuLimits, constraints: frozenset | None, rules: ScopeRules, detail: set[str] = frozenset()) -> Scope:
    """`waiting`: the jobs that could ever start, in start order (the claims rule's
    `start_order`); `constraints`: the scenario's (shapes.scenario_constraints, computed once
    per plan); `rules`: what the rules say of victims; `detail`: nodes that always get their
    own variables (composable nodes)."""
    givers = rules.givers(st, waiting)
    cand = _candidates(s, waiting, givers, cfg.max_moves > 0 and bool(waiting), rules)
    if len(s.nodes) <= cfg.exact_nodes:
        names = [n.name for n in s.nodes]
        gpus = _fraction_gpus(layout, names, _fraction_items(waiting + cand.movable), cand.legal, cand.movable)
        return Scope(True, names, {}, cand.legal, cand.movable, waiting, gpus, givers, apart=rules.apart(),
                     confine=rules.confine)

    def cost(victim: Job) -> tuple:  # asked only of the victims the rankings cost, not of every legal one
        return rules.victim_cost(victim, st, limits)
    sc = _GreedyPass(s, layout, waiting, cfg, limits, givers, cand, rules, cost, constraints).scope(detail)
    sc.apart, sc.confine = rules.apart(), rules.confine
    return sc


@dataclass
class _Candidates:
    """The running jobs the plan could let go or move, in the scenario's order."""

    legal: list[Job]  # those the rules could ever let go (`_may_be_victim`)
    alike: dict[Hashable, list[Job]]  # the same by `ScopeRules.victim_key`
    movable: list[Job]  # those that may move (preemptible ones; none when nothing moves)
    gangs: list[set[str]]  # the nodes of each legal or movable job with replicas on several nodes


def _candidates(s: Scenario, waiting: list[Job], givers: dict[str, set[str]], moves: bool,
                rules: ScopeRules) -> _Candidates:
    """One pass over the running jobs, judging one job for all alike in `victim_key`:
    whether the rules could let it go, whether it may move (`moves`: whether anything may)."""
    top: dict[str, Job] = {}  # each queue's highest-priority waiting job
    for job in waiting:
        if job.queue not in top or job.priority > top[job.queue].priority:
            top[job.queue] = job
    giving = set().union(*givers.values())
    verdict: dict[Hashable, tuple[bool, bool]] = {}  # `victim_key` -> (may go, may move) for jobs alike in it
    out = _Candidates([], defaultdict(list), [], [])
    for j in s.jobs:
        if not j.running:
            continue
        key = rules.victim_key(j)
        if key not in verdict:
            verdict[key] = (_may_be_victim(j, top.get(j.queue), giving, rules),
                            moves and j.is_preemptible and rules.may_move(j, None))
        legal, movable = verdict[key]
        if legal:
            out.legal.append(j)
            out.alike[key].append(j)
        if movable:
            out.movable.append(j)
        if (legal or movable) and len(j.running) > 1 and len(nodes := set(j.running)) > 1:
            out.gangs.append(nodes)
    return out


def _fraction_items(jobs: list[Job]) -> int:
    """How many fractional replicas `jobs` hold."""
    return sum(j.replicas for j in jobs if j.is_fractional)


def _may_be_victim(job: Job, top: Job | None, giving: set[str], rules: ScopeRules) -> bool:
    """Could the rules ever let `job` go: for another queue (its queue is among the
    `giving`, those some queue may take from), or for `top`, the highest-priority waiting
    job of its own queue? Non-preemptible jobs never go."""
    return job.is_preemptible and (rules.may_take(job, None, giving) or (top is not None and rules.may_take(job, top, set())))


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


class _GreedyPass:
    """The greedy pass of a large cluster, one method per step. In start order, each waiting
    replica takes the first that serves: a fraction, a GPU shared by fractions or a newly
    opened one; a whole-GPU replica, free GPUs (best fit), else a node where moving a few
    jobs out gathers its block; then, for either, the cheapest reclaim nodes
    (`rankings.ReclaimRankings`), else a node where free GPUs, victims and movers do together. The
    nodes it touched become detailed or reclaim nodes (`_result`)."""

    def __init__(self, s: Scenario, layout: Layout, waiting: list[Job], cfg: PlannerConfig, limits: GpuLimits,
                 givers: dict[str, set[str]], cand: _Candidates, rules: ScopeRules, cost: Callable[[Job], tuple],
                 constraints: frozenset | None):
        """`rules`: what the rules say of victims; `cost`: a legal victim's (`ScopeRules.victim_cost`);
        `constraints`: the scenario's (shapes.scenario_constraints)."""
        self.constraints, self.rules = constraints, rules
        self.s, self.layout, self.waiting, self.cfg, self.limits = s, layout, waiting, cfg, limits
        self.givers, self.legal, self.movable, self.gangs = givers, cand.legal, cand.movable, cand.gangs
        self.nodes = {n.name: n for n in s.nodes}
        self.free = {n: len(nl.free_indices()) for n, nl in layout.nodes.items()}  # before the pass
        self.spare = spare_resources(s)  # with the jobs running now
        self.safe = _pool_safe(s, self.free, self.spare, waiting)
        self.index = _FreeIndex(s, self.free)  # free GPUs as the pass reserves them
        self.rankings = ReclaimRankings(layout, self.free, cand.alike, rules, cost)
        self.consolidations = Consolidations(cand.movable, cfg.max_moves, rules.lost_work)
        self.detailed: set[str] = set()
        self.fraction_gpus: dict[str, set[int]] = defaultdict(set)  # node -> GPUs chosen for new fractions
        self.used_for_reclaim: set[str] = set()
        self.consolidated: set[str] = set()
        self.moves_left = cfg.max_moves
        self.opened = _shared_gpus(layout)  # [room, node, gpu] of GPUs virtually holding fractions, best fit first

    def scope(self, detail: set[str]) -> Scope:
        """The pass over every waiting replica; `detail`: nodes detailed whatever it chose."""
        for job in self.waiting:
            shape = shape_of(job)
            allowed = self.rules.confine(job)
            for _ in range(job.replicas):
                self._place(job, shape, allowed)
        return self._result(detail)

    def _place(self, job: Job, shape: Shape, allowed: frozenset[str] | None) -> None:
        """One replica of `job`, on the nodes a rule confines it to (`allowed`; None: any)."""
        if shape.fractional:
            if self._share_gpu(job, shape, allowed):
                return
            need = 1
        else:
            need = shape.whole_gpus
            if self._take_free(job, shape, need, allowed):
                return
            # moves before preemption: a node where moving a few jobs out gathers the block (for a
            # job a rule confines, only where no victim makes room: its few nodes rarely gather one)
            if allowed is None and self._gather(job, shape, need, allowed):
                return
        if not self._reclaim(job, shape, need, allowed) and allowed is not None:
            self._gather(job, shape, need, allowed)

    def _gather(self, job: Job, shape: Shape, need: int, allowed: frozenset[str] | None) -> bool:
        """A node of `allowed` where moving a few jobs out gathers a block for a replica of `job`."""
        if not self.rules.may_move(None, job):
            return False
        found = self.consolidations.find(shape, need, self.index, self._taken(), self.moves_left, self._cpu_ok,
                                         allowed)
        return self._consolidate(found, job, need)

    def _taken(self) -> set[str]:
        """Nodes already reserved for reclaim or consolidation."""
        return self.used_for_reclaim | self.consolidated

    def _cpu_ok(self, job: Job, allowed: frozenset[str] | None = None):
        """Whether a node (of `allowed`; None: any) has the CPUs and memory for one more replica of `job`."""
        def ok(node: str) -> bool:
            if allowed is not None and node not in allowed:
                return False
            room = self.spare[node]
            return all(room.get(r, float("inf")) + EPS >= (getattr(job, r) or 0) for r in ("cpu", "memory_gib"))
        return ok

    def _share_gpu(self, job: Job, shape: Shape, allowed: frozenset[str] | None) -> bool:
        """A fractional replica on a GPU already holding fractions, else on a newly opened one."""
        spot = self._opened_spot(job, shape, allowed) or self._open_gpu(job, shape, allowed)
        if spot is None:
            return False
        spot[0] -= job.gpus
        self.opened.sort()
        self.detailed.add(spot[1])
        self.fraction_gpus[spot[1]].add(spot[2])
        return True

    def _opened_spot(self, job: Job, shape: Shape, allowed: frozenset[str] | None) -> list | None:
        """The fullest opened GPU the fraction fits on, of a model and node it accepts."""
        return next((x for x in self.opened if fits_on_gpu(1 - x[0], job.gpus)
                     and (allowed is None or x[1] in allowed)
                     and shape.fits_model(self.nodes[x[1]]) and self.index.allows(shape, x[1])
                     and self.limits.room_for_fraction(x[1], x[2], job.gpus)), None)

    def _open_gpu(self, job: Job, shape: Shape, allowed: frozenset[str] | None) -> list | None:
        """Open a GPU for fractions on the best-fit node with a free GPU."""
        node = self.index.best_fit(shape, 1, self._cpu_ok(job, allowed))
        gpus = [] if node is None else self._gpus_to_open(node)
        if not gpus:
            return None
        spot = [1.0, node, gpus[0]]
        self.opened.append(spot)
        self.index.set(node, self.index.free[node] - 1)
        return spot

    def _gpus_to_open(self, node: str) -> list[int]:
        """A free GPU, else (the node's free GPUs being virtual: victims') one held whole."""
        nl, chosen = self.layout.nodes[node], self.fraction_gpus[node]
        return ([i for i in nl.free_indices() if i not in chosen]
                or [i for i, sl in enumerate(nl.slots) if nl.healthy(i) and sl.whole and i not in chosen])

    def _take_free(self, job: Job, shape: Shape, need: int, allowed: frozenset[str] | None) -> bool:
        """A whole-GPU replica on free GPUs, best fit; detailed where CPUs or memory could run short."""
        node = self.index.best_fit(shape, need, self._cpu_ok(job, allowed))
        if node is None:
            return False
        self.index.set(node, self.index.free[node] - need)
        _take(self.spare[node], job)
        if not self.safe[node]:
            self.detailed.add(node)
        return True

    def _consolidate(self, found: Consolidation | None, job: Job, need: int) -> bool:
        """Reserve a consolidation node for a replica of `job` (where it has the CPUs and
        memory), its movers their destinations, and detail them all."""
        if found is None or not self._cpu_ok(job)(found.node):
            return False
        self.index.set(found.node, self.index.free[found.node] + found.gathered - need)
        _take(self.spare[found.node], job)
        for name, dest in found.destinations.items():
            mover = self.consolidations.job(name)
            self.index.set(dest, self.index.free[dest] - int(mover.gpus))
            _take(self.spare[dest], mover)
            _take(self.spare[found.node], mover, -1)
        self.consolidated.add(found.node)
        self.detailed.add(found.node)
        self.detailed.update(found.destinations.values())
        self.moves_left -= len(found.destinations)
        return True

    def _reclaim(self, job: Job, shape: Shape, need: int, allowed: frozenset[str] | None) -> bool:
        """The cheapest reclaim nodes for a replica of `job` (the first reserved for it); with
        none, a node where free GPUs, legal victims and movers do together. Whether it found any."""
        mine = self.givers.get(job.queue, set())
        eligible = self.index.eligible.names(shape.constraints)
        if allowed is not None:
            eligible = allowed if eligible is None else eligible & allowed
        chosen = self.rankings.nodes(job, need, mine, self._taken(), self.cfg.candidate_nodes_per_job, eligible)
        if not chosen and not shape.fractional and allowed is None and self.rules.may_move(None, job):
            found = self.consolidations.find_beside_victims(
                shape, need, self.index, self._taken(), self.moves_left, self._cpu_ok,
                self.rankings.victims(job, mine), self.rankings.key(job, mine), allowed)
            if self._consolidate(found, job, need):
                return True
        for k, node in enumerate(chosen):
            self.used_for_reclaim.add(node)
            if k == 0:  # the cheapest reclaim node is reserved for this replica
                freed = self.rankings.freed(node, job, mine)
                self.index.set(node, max(0, self.index.free[node] + freed - need))
        return bool(chosen)

    def _result(self, detail: set[str]) -> Scope:
        """Detailed nodes, pools, reclaim nodes' cuts and the candidates on detailed nodes."""
        # a pooled node's cut takes victims of one replica only: a reclaim node with a gang victim is
        # detailed (with the gang's other nodes, below), so the program may take the gang
        detailed = self.detailed | {n for n in self.used_for_reclaim if not self.safe[n] or self.rankings.holds_gang(n)}
        detailed |= detail  # composable nodes: their own variables, whatever the greedy pass chose
        _close_over_gangs(self.gangs, detailed)
        order = [n.name for n in self.s.nodes if n.name in detailed]
        cuts = {n.name: cut for n in self.s.nodes if n.name in self.used_for_reclaim and n.name not in detailed
                and (cut := self.rankings.cut(n.name))}
        victims = [j for j in self.legal if detailed.issuperset(j.running)]
        movers = [j for j in self.movable if detailed.issuperset(j.running)]
        return Scope(False, order, self._pools(detailed, cuts), victims, movers, self.waiting,
                     self._chosen_fraction_gpus(order, victims, movers), self.givers, cuts)

    def _pools(self, detailed: set[str], cuts: dict[str, list[Job]]) -> dict[object, list[str]]:
        """Nodes not detailed that may give GPUs (free ones, or their cut's), by pool key."""
        pools: dict[object, list[str]] = defaultdict(list)
        constraints = self.constraints
        for n in self.s.nodes:
            if (n.name not in detailed and not n.shared and not n.mig and self.safe[n.name]
                    and (self.free[n.name] > 0 or n.name in cuts)):
                group = self.rules.pool_group(n.name)
                key = _pool_key(n, constraints)
                pools[key if group is None else (key, group)].append(n.name)
        return dict(pools)

    def _chosen_fraction_gpus(self, order: list[str], victims: list[Job], movers: list[Job]) -> dict[str, list[int]]:
        """GPUs open to new fractions: on large clusters only the GPUs the greedy pass chose,
        and those that may empty."""
        gpus = _fraction_gpus(self.layout, order, _fraction_items(self.waiting + movers), victims, movers)
        out = {}
        for n, mine in gpus.items():
            keep = self.fraction_gpus.get(n, set()) | {i for i in mine if not self.layout.nodes[n].slots[i].free}
            if kept := [i for i in mine if i in keep]:
                out[n] = kept
        return out


def _shared_gpus(layout: Layout) -> list[list]:
    """[room, node, gpu] of each healthy GPU shared by fractions with room left, fullest first."""
    return [list(x) for x in sorted((1 - sl.used, n, i) for n, nl in layout.nodes.items()
                                    for i, sl in enumerate(nl.slots)
                                    if sl.fractions and not sl.whole and nl.healthy(i) and has_room(sl.used))]


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
    their free GPUs: only their GPUs need counting. A node that declares neither (`spare`
    empty) never runs short."""
    per_gpu = {r: max((((getattr(j, r) or 0) / j.gpus) for j in waiting if not j.is_fractional), default=0.0)
               for r in ("cpu", "memory_gib")}
    return {n.name: not spare[n.name] or all(spare[n.name].get(r, float("inf")) + EPS >= per_gpu[r] * free[n.name]
                                             for r in ("cpu", "memory_gib"))
            for n in s.nodes}


def _close_over_gangs(gangs: list[set[str]], detailed: set[str]) -> None:
    """A candidate with replicas on several nodes (`gangs`: the nodes of each) frees GPUs on
    all of them: detail them all."""
    changed = True
    while changed:
        changed = False
        for nodes in gangs:
            if not nodes.isdisjoint(detailed) and not nodes <= detailed:
                detailed.update(nodes)
                changed = True
