"""Topology: a job's replicas in one domain of a level, or in as few as can hold them, and
racks kept whole for the jobs that need them (docs/topology.md; Kueue's Topology Aware
Scheduling and KAI's topology-aware placement read the same node labels).

`required: L`: every replica on the nodes of one L-domain; the job waits with `NoDomainFits`
when none has room. `preferred: L`: as few L-domains as possible, then as few domains of each
narrower level; it may span domains. Each waiting job with a topology is placed as a shape of
its own (`apart`), so the program can tell where its replicas go: a binary per candidate
domain chooses the one a required job's replicas may use, and a binary per domain a preferred
job uses counts the domains its stage (after the moves: compactness never costs a move)
keeps few. Among placements otherwise equal, the `domains` stage (before node-level packing)
puts replicas in the fullest domains, widest level first, so that the largest free domain of
each level stays as large as it can; pooled replicas are packed by the same order
(`node_order`). A job placed by topology is not moved (its replicas would need a domain
again); it may be preempted.

On a large cluster the rule chooses each job's candidate domains before the program (`_Plan`):
the tightest domain whose free GPUs hold the job (best fit, as Kueue), then those where the
fewest GPUs held by preemptible jobs would have to go, up to `candidate_nodes_per_job`
domains, reserving what it chose for later jobs; their nodes, and nodes with free GPUs a
mover could go to, get their own variables.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass

from gpu_policy.model import Job, Scenario
from gpu_policy.model.layout import Layout
from gpu_policy.model.topology import DomainKey, Domains
from gpu_policy.planner.core.codes import Reason, gpu_count
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.rule import PlanInputs, Rule, Stage
from gpu_policy.planner.core.shapes import Shape, shape_of

@dataclass(frozen=True)
class _Own:
    """The mark that gives a waiting job with a topology a shape of its own (`Rule.apart`)."""

    job: str


class Topology(Rule):
    """Required and preferred domains, packing by domain, `NoDomainFits`."""

    name = "topology"
    codes = {"NoDomainFits": "no domain of the level the job requires has room for all its replicas",
             "CandidateDomainsTaken": "on a large cluster the plan looked for its room in a few domains, and other "
                                      "jobs took it there; another domain has room, and the next plan looks there"}
    #: Where its stages rank: after the moves (80), before node-level packing (100).
    PREFERRED = 85
    DOMAINS = 95

    def __init__(self, inputs: PlanInputs):
        super().__init__(inputs)
        s = inputs.scenario
        self.domains = Domains.of(s) if s.topology else None
        self.waiting = {j.name: j for j in s.jobs if j.topology and not j.running} if self.domains else {}
        self.exact = len(s.nodes) <= inputs.config.exact_nodes
        self.chosen = _Candidates(s, inputs.layout, self.domains,
                                  None if self.exact else 1)
        self.preferring_chosen = False

    # -- before the program -------------------------------------------------------------------

    def apart(self, job: Job) -> Hashable:
        return _Own(job.name) if job.name in self.waiting else None

    def may_move(self, job: Job | None, claimant: Job | None) -> bool | None:
        return False if job is not None and job.topology and self.domains else None

    def confine(self, job: Job) -> frozenset[str] | None:
        if job.name not in self.waiting or job.topology.required is None:
            return None
        return self.chosen.of(job)

    def pool_group(self, node: str) -> Hashable:
        """On a large cluster, the deepest domain of a node in some job's candidate domains:
        its pool is its domain's own, so that the rows can tell where pooled replicas go. A
        job that only prefers a level is confined nowhere (it may go anywhere), but its
        candidate domains' pools are kept apart too, so it can be placed there compactly.
        Nodes without every level's label are pooled apart from labelled ones, so that a job
        of one replica that requires a level (any labelled node will do) may use the pools
        of labelled nodes."""
        if self.exact or not self.waiting:
            return None
        if not self.preferring_chosen:  # the candidates of jobs that only prefer, asked of no one else
            self.preferring_chosen = True
            for job in sorted(self.waiting.values(), key=lambda j: (-j.priority, j.submitted_at, j.name)):
                if job.topology.required is None:
                    self.chosen.of(job)
        if node in self.chosen.inside:
            return self.domains.deepest(node)
        return None if node in self.domains.of_node[-1] else ("unlabelled",)  # kept from labelled nodes' pools

    # -- the program --------------------------------------------------------------------------

    def rows(self, ctx: PlanContext) -> None:
        """Per waiting job with a topology that may start: one binary per candidate domain of
        its required level, the chosen domain holding all its replicas; and one per domain of
        its preferred level (and of each other level, `_counted_levels`) it could use, to
        count them."""
        #: per position in each job's levels (`_counted_levels`) -> {binary or pooled place: domains it counts}
        self.spread: dict[int, dict] = defaultdict(dict)
        if not self.waiting:
            return
        m = ctx.m
        places = self._places_by_shape(m, ctx.scope.pools)
        for kind, start in m.decisions.starts.items():
            job = m.decisions.kinds[kind][0]
            if job.name not in self.waiting:
                continue
            mine = places.get(kind.shape, [])
            top = job.topology
            domains = self._by_domain(mine, self.domains.level(top.required)) if top.required is not None else {}
            if len(domains) > 1:  # one domain (a large cluster's candidate) holds the job without rows
                chosen = []
                for key, terms in domains.items():
                    y = m.binary("domain", 0)
                    # replicas of the job in domain D <= its replicas * domain[D]
                    m.add(affine({**terms, y: -job.replicas}) <= 0, "in_domain")
                    chosen.append(y)
                if chosen:
                    # one domain at most, and one if it starts
                    m.add(affine({**{y: 1 for y in chosen}, start: -1}) <= 0, "one_domain")
            if top.preferred is not None:
                levels = _counted_levels(self.domains.level(top.preferred), len(self.domains.levels))
                for position, level in enumerate(levels):
                    counted = self.spread[position]
                    for key, terms in self._by_domain(mine, level, alone=counted).items():
                        u = m.binary("spans", 0)
                        # replicas of the job in domain D <= its replicas * uses[D]
                        m.add(affine({**terms, u: -job.replicas}) <= 0, "spans")
                        counted[u] = 1

    def _places_by_shape(self, m, pools: dict) -> dict[Shape, list[tuple[str | None, object]]]:
        """Per shape, its places as (node, variable): a detailed node, or for a pool of one
        domain (`pool_group`) a node of it; None for a pool of nodes of many domains."""
        out: dict[Shape, list] = defaultdict(list)
        for (n, shape), var in m.placement.whole.items():
            out[shape].append((n, var))
        for (n, _i, shape), var in m.placement.frac.items():
            out[shape].append((n, var))
        for (key, shape), var in m.placement.pool.items():
            first = pools[key][0]
            out[shape].append((first if self.pool_group(first) is not None else None, var))
        return out

    def _by_domain(self, places: list[tuple[str, object]], level: int, alone: dict | None = None) -> dict:
        """The job's places (node, variable) grouped by their domain at `level`, as {domain:
        {variable: 1}}; a place on a node in no domain of the level goes to `alone` (each of
        its replicas a domain of its own), or nowhere when None (a required level's nodes
        only are places)."""
        out: dict[DomainKey, dict] = defaultdict(dict)
        for node, var in places:
            key = None if node is None else self.domains.domain(node, level)
            if key is not None:
                out[key][var] = 1
            elif alone is not None:
                alone[var] = 1
        return out

    def stages(self, ctx: PlanContext) -> list[Stage]:
        if not self.domains:
            return []
        out = []
        if any(self.spread.values()):
            out.append(Stage(self.PREFERRED, lambda: [(f"topology_{position + 1}", affine(terms))
                                                      for position, terms in sorted(self.spread.items()) if terms]))
        if ctx.m.placement.whole or ctx.m.placement.frac:
            out.append(Stage(self.DOMAINS, lambda: [("domains", self._domain_packing(ctx))]))
        return out

    def _domain_packing(self, ctx: PlanContext):
        """Each GPU placed costs the free GPUs its domains had before the plan, widest level
        first (each level's part below one unit of the level before): the fullest domains
        fill first, and the emptiest stay whole."""
        weight = self.node_weights(ctx.layout)
        terms: dict = defaultdict(float)
        for (n, shape), var in ctx.m.placement.whole.items():
            terms[var] += weight.get(n, 0.0) * shape.gpus
        for (n, _i, shape), var in ctx.m.placement.frac.items():
            terms[var] += weight.get(n, 0.0) * shape.gpus
        return affine(terms)

    def node_weights(self, layout: Layout) -> dict[str, float]:
        """Per node, the free GPUs of its domains on `layout`, widest level first, as one
        number: level i's count over the most any of its domains has, scaled by 1 / 8^i."""
        free = {n: len(nl.free_indices()) for n, nl in layout.nodes.items()}
        out: dict[str, float] = defaultdict(float)
        for level, members in enumerate(self.domains.nodes):
            counts = {key: sum(free[n] for n in nodes) for key, nodes in members.items()}
            most = max(counts.values(), default=0) or 1
            for key, nodes in members.items():
                for n in nodes:
                    out[n] += counts[key] / most / 8 ** level
        return out

    # -- the reasons --------------------------------------------------------------------------

    def why_never(self, job: Job, judged: Judged) -> Reason | None:
        """No domain of the required level could ever hold the job, however empty."""
        if not self.domains or not job.topology or job.topology.required is None:
            return None
        level = self.domains.level(job.topology.required)
        capacity = {key: _replicas(job, [(n, len(judged.layout.nodes[n].node.healthy_gpus)) for n in nodes
                                         if shape_of(job).fits(judged.layout.nodes[n].node)])
                    for key, nodes in self.domains.nodes[level].items()}
        if any(fit >= job.replicas for fit in capacity.values()):
            return None
        label = self.inputs.scenario.topology[level].label
        if not capacity:
            return self.reason("NoDomainFits", f"can never fit: it needs one {job.topology.required}, and no node "
                                               f"carries the label {label}")
        key = max(capacity, key=capacity.__getitem__)  # the first of the largest
        return self.reason("NoDomainFits", f"can never fit: needs {_ask(job)} in one {job.topology.required}; the "
                                           f"largest holds {capacity[key]} such replica"
                                           f"{'s' if capacity[key] != 1 else ''} ({Domains.name(key)})")

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """No domain of the required level has room for all the job's replicas after the
        plan: the level, the job's GPUs, the most free GPUs in one domain and where. Or one
        has, but on a large cluster it was not among the job's candidates."""
        if not self.domains or not job.topology or job.topology.required is None:
            return None
        level = self.domains.level(job.topology.required)
        free = judged.shared((self.name, "free"), lambda: _free_after(judged))
        shape = shape_of(job)
        best: tuple | None = None
        for key, nodes in self.domains.nodes[level].items():
            usable = [(n, free[n]) for n in nodes if shape.fits(judged.layout.nodes[n].node)]
            fit = _replicas(job, usable)
            if fit >= job.replicas:
                return self._not_looked_at(job, key, nodes)
            mine = (sum(f for _, f in usable), fit, key)
            best = mine if best is None or mine[:2] > best[:2] else best  # the first of the most free
        what = job.topology.required
        if best is None:
            return self.reason("NoDomainFits", f"needs {_ask(job)} in one {what}; no {what} has a node it fits")
        gpus, fit, key = best
        return self.reason("NoDomainFits",
                           f"needs {_ask(job)} in one {what}; the most free in one {what} is {gpu_count(gpus)} "
                           f"({Domains.name(key)}, room for {fit} of its {job.replicas} "
                           f"replica{'s' if job.replicas != 1 else ''})")

    def _not_looked_at(self, job: Job, key: DomainKey, nodes: list[str]) -> Reason | None:
        """Domain `key` has room for the job after the plan; if the plan did not look there
        (a large cluster's candidates), say so."""
        mine = self.chosen.nodes.get(job.name)
        if self.exact or mine is None or not mine.isdisjoint(nodes):
            return None
        looked = sorted({Domains.name(self.domains.domain(n, self.domains.level(job.topology.required)))
                         for n in mine})
        return self.reason("CandidateDomainsTaken",
                           f"the plan looked for room in {job.topology.required} {', '.join(looked) or 'none'}, and "
                           f"other jobs took it; {Domains.name(key)} has room for it now: the next plan looks there")

    # -- after the solve ----------------------------------------------------------------------

    def summarize(self, after: Layout) -> dict:
        """`largest_free_domain_after`: per level, the most free whole GPUs in one domain."""
        if not self.domains:
            return {}
        free = {n: len(nl.free_indices()) for n, nl in after.nodes.items()}
        return {"largest_free_domain_after": {
            name: max((sum(free[n] for n in nodes) for nodes in self.domains.nodes[level].values()), default=0)
            for level, name in enumerate(self.domains.levels)}}

    def node_order(self, layout: Layout) -> dict[str, float] | None:
        """What packing a pooled replica prefers first: the fullest domains (`node_weights`)."""
        return self.node_weights(layout) if self.domains else None


def _counted_levels(preferred: int, levels: int) -> list[int]:
    """The levels whose domains a preferred job keeps few, in order: its own, then each wider
    one (a job that spans racks is kept in one block if it can, as Kueue climbs to the level
    above), then each narrower one. Stage `topology_k` counts every job's k-th level."""
    return [preferred, *range(preferred - 1, -1, -1), *range(preferred + 1, levels)]


def _free_after(judged: Judged) -> dict[str, float]:
    """Per node, its free room after the plan: whole free GPUs, or for a job of fractions the
    room on its shared GPUs (`_replicas` reads what the job needs)."""
    return {nr.name: nr.free for nr in judged.node_rooms}


def _replicas(job: Job, free: list[tuple[str, float]]) -> int:
    """How many replicas of `job` free GPUs (per node) hold: whole blocks, or a fraction's
    places on the free GPUs."""
    if job.is_fractional:
        per_gpu = int(1 / job.gpus + 1e-9)
        return sum(int(f) * per_gpu for _, f in free)
    return sum(int(f // job.gpus) for _, f in free)


def _ask(job: Job) -> str:
    """'32 GPUs (4 x 8)': what a job asks in all, and per replica."""
    if job.replicas == 1:
        return gpu_count(job.total_gpus)
    return f"{gpu_count(job.total_gpus)} ({job.replicas} x {job.gpus:g})"


class _Candidates:
    """Each waiting job's candidate domains: the nodes it may use (`of`), and every node of some
    job's candidate domains (`inside`). On a small cluster, decided whole, every domain of its
    level; so too for a job of one replica (any labelled node will do). On a large one, a job
    of several replicas asked for the first time (the greedy pass asks in start order) gets,
    where domains' free GPUs hold it, those domains, tightest first, the best fit (as Kueue's)
    reserving its free GPUs for the jobs after it; otherwise the domains where the fewest GPUs
    of preemptible jobs would have to go; `per_job` of them. The greedy pass then looks for its
    room in them only."""

    def __init__(self, s: Scenario, layout: Layout, domains: Domains | None, per_job: int | None):
        self.s, self.layout, self.domains, self.per_job = s, layout, domains, per_job
        self.nodes: dict[str, frozenset[str] | None] = {}
        self.inside: set[str] = set()
        self.free = {n: len(nl.free_indices()) for n, nl in layout.nodes.items()}
        self._victims: dict[str, list[tuple[int, int]]] | None = None
        self.usable: dict[tuple, tuple[dict, frozenset[str]]] = {}  # (shape, level) -> (domain -> nodes it fits, all)

    @property
    def victims(self) -> dict[str, list[tuple[int, int]]]:
        if self._victims is None:
            self._victims = _preemptible_gpus(self.s, self.layout)
        return self._victims

    def of(self, job: Job) -> frozenset[str] | None:
        """The nodes of `job`'s candidate domains; for a job that only prefers a level, None
        where they cannot hold it."""
        if job.name not in self.nodes:
            required = job.topology.required is not None
            level = self.domains.level(job.topology.required or job.topology.preferred)
            usable, every = self._usable(shape_of(job), level)
            if self.per_job is None or (required and job.replicas == 1):  # one replica: any domain will do
                self.nodes[job.name] = every
                return every
            if required:
                keys = _choose(job, usable, self.free, self.victims, self.per_job)
            else:
                keys = _choose_preferred(job, usable, self.free, self.per_job)
            mine = frozenset(n for key in keys for n in usable[key])
            self.nodes[job.name] = mine if keys or required else None
            self.inside |= mine
        return self.nodes[job.name]

    def _usable(self, shape: Shape, level: int) -> tuple[dict, frozenset[str]]:
        """Per domain of `level`, its nodes a replica of `shape` fits, and all of them together
        (a fit judged once per kind of node)."""
        if (shape, level) not in self.usable:
            fits: dict = {}
            out = {}
            for key, nodes in self.domains.nodes[level].items():
                mine = []
                for n in nodes:
                    node = self.layout.nodes[n].node
                    kind = _kind(node, shape)
                    if kind not in fits:
                        fits[kind] = shape.fits(node)
                    if fits[kind]:
                        mine.append(n)
                if mine:
                    out[key] = mine
            self.usable[shape, level] = out, frozenset(n for nodes in out.values() for n in nodes)
        return self.usable[shape, level]


def _kind(node, shape: Shape) -> Hashable:
    """What of a node decides whether a replica of `shape` fits it: its name where the shape
    has placement constraints (its labels and taints decide), else what it offers."""
    if shape.constraints is not None or node.taints:
        return node.name
    return (node.gpu_model, len(node.healthy_gpus), node.cpu, node.memory_gib, node.gpu_sharing, tuple(node.mig))


def _choose(job: Job, usable: dict, free: dict[str, int], victims: dict[str, list[tuple[int, int]]],
            k: int) -> list:
    """A job's `k` candidate domains on a large cluster (`_Candidates`): those whose free GPUs
    hold it, tightest first (the first, the best fit, reserves them in `free`); then those
    where the GPUs of the lowest-priority preemptible jobs would make room (the fewest
    replicas lacking room, the lowest priority that must go, the fewest GPUs that must go)."""
    have = {key: _replicas(job, [(n, free[n]) for n in nodes]) for key, nodes in usable.items()}
    fitting = sorted((sum(free[n] for n in usable[key]), key) for key, fit in have.items() if fit >= job.replicas)
    if fitting:
        _reserve(job, usable[fitting[0][1]], free)
        return [key for _, key in fitting[:k]]
    rough = []  # every preemptible job gone: the replicas still lacking room
    for key, nodes in usable.items():
        could = _replicas(job, [(n, free[n] + sum(g for _, g in victims.get(n, ()))) for n in nodes])
        rough.append((max(0, job.replicas - could), job.replicas - have[key], key))
    rough.sort()
    ranked = [(_cheapest(job, usable[key], free, victims), key) for *_, key in rough[:4 * k]]
    return [key for _, key in sorted(ranked)[:k]]


def _cheapest(job: Job, nodes: list[str], free: dict[str, int], victims: dict[str, list[tuple[int, int]]]) -> tuple:
    """(the highest priority that must go, the GPUs that must go) for the domain of `nodes` to
    hold the job, taking its preemptible jobs lowest priority first; (inf, inf) if they cannot."""
    priorities = sorted({p for n in nodes for p, _ in victims.get(n, ())})
    for top in priorities:
        gone = {n: sum(g for p, g in victims.get(n, ()) if p <= top) for n in nodes}
        if _replicas(job, [(n, free[n] + gone[n]) for n in nodes]) >= job.replicas:
            return top, sum(gone.values())
    return float("inf"), float("inf")


def _choose_preferred(job: Job, usable: dict, free: dict[str, int], k: int) -> list:
    """A preferring job's candidate domains on a large cluster: those whose free GPUs hold it,
    tightest first (`k`, the first reserving its free GPUs); else the fewest domains, most free
    first, whose free GPUs hold it together; none if all of them cannot."""
    have = {key: _replicas(job, [(n, free[n]) for n in nodes]) for key, nodes in usable.items()}
    fitting = sorted((sum(free[n] for n in usable[key]), key) for key, fit in have.items() if fit >= job.replicas)
    if fitting:
        _reserve(job, usable[fitting[0][1]], free)
        return [key for _, key in fitting[:k]]
    out, held = [], 0
    for key in sorted(have, key=lambda key: (-have[key], key)):
        if held >= job.replicas or not have[key]:
            break
        out.append(key)
        held += have[key]
    return out if held >= job.replicas else []


def _reserve(job: Job, nodes: list[str], free: dict[str, int]) -> None:
    """Take the job's replicas off the free GPUs of `nodes`, best fit, for the jobs after it."""
    need = 1 if job.is_fractional else int(job.gpus)
    for _ in range(job.replicas):
        best = min((n for n in nodes if free[n] >= need), key=lambda n: (free[n], n))
        free[best] -= need


def _preemptible_gpus(s: Scenario, layout: Layout) -> dict[str, list[tuple[int, int]]]:
    """Per node, (priority, healthy GPUs held whole) of each preemptible job on it: what a plan could free."""
    preemptible = {j.name: j.priority for j in s.jobs if j.running and j.is_preemptible}
    out: dict[str, list[tuple[int, int]]] = {}
    for n, nl in layout.nodes.items():
        held: dict[str, int] = {}
        for i, slot in enumerate(nl.slots):
            if slot.whole in preemptible and nl.healthy(i):
                held[slot.whole] = held.get(slot.whole, 0) + 1
        if held:
            out[n] = [(preemptible[name], g) for name, g in held.items()]
    return out
