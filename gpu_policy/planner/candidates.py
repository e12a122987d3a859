"""What the integer program may change: victims, and where waiting jobs may go.

A running job is a *victim candidate* only when the rules could ever let it be
preempted: it is preemptible and either a waiting job of its own queue has a
higher priority (preemption inside a queue), or another queue with waiting work
may reclaim from its queue. Reclaim has two tiers: a queue below its fair share
may take from queues above theirs, and a queue below its deserved quota may take
from queues above their deserved quota (guarantees beat over-quota use). Every other
running job is a constant of the program. A waiting job's candidate nodes are
those where it could fit, counting GPUs that legal victims would free; on large
clusters at most ``candidate_nodes_per_job`` of them are kept (best fit among
nodes with room now, then the cheapest to reclaim).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpu_policy.fair_share import queue_demands
from gpu_policy.model import Job, Node, Scenario
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.layout import Layout

_EPS = 1e-9


@dataclass
class Candidates:
    standing: Standing
    victims: list[Job]
    cost: dict[str, float]  # victim name -> preemption cost (stage 2)
    receivers: dict[str, float] = field(default_factory=dict)  # queue that may reclaim -> its cap
    idle: dict[str, float] = field(default_factory=dict)  # idle victim of a queue above its share -> seconds
    nodes: dict[str, list[str]] = field(default_factory=dict)  # whole-GPU job -> nodes
    gpus: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # fractional job -> (node, index)


@dataclass(frozen=True)
class Standing:
    """Which queues are below or above their fair share and their deserved quota."""

    below_share: frozenset[str]
    above_share: frozenset[str]
    below_deserved: frozenset[str]
    above_deserved: frozenset[str]

    @property
    def reclaimable(self) -> frozenset[str]:
        return self.above_share | self.above_deserved


def standing(s: Scenario, fair: dict[str, int], before: dict[str, float]) -> Standing:
    demand = queue_demands(s)
    leaves = [q for q in s.queues if not s.children(q.name)]
    return Standing(
        below_share=frozenset(q.name for q in leaves if before[q.name] < fair[q.name] - _EPS),
        above_share=frozenset(q.name for q in leaves if before[q.name] > fair[q.name] + _EPS),
        below_deserved=frozenset(q.name for q in leaves
                                 if before[q.name] < min(q.deserved, demand[q.name].total) - _EPS),
        above_deserved=frozenset(q.name for q in leaves if before[q.name] > q.deserved + _EPS),
    )


def legal_victim(victim: Job, job: Job, st: Standing) -> bool:
    """May `victim` be preempted to make room for the waiting `job`?"""
    if not victim.is_preemptible:
        return False
    if victim.queue == job.queue:
        return victim.priority < job.priority
    return ((victim.queue in st.above_share and job.queue in st.below_share)
            or (victim.queue in st.above_deserved and job.queue in st.below_deserved))


def victim_costs(victims: list[Job], cfg: PlannerConfig) -> dict[str, float]:
    """Costs that order victims of one priority: least lost work, then most recent.

    The lost work (GPU-seconds since the last checkpoint) is scaled to at most 1;
    a recency term below 1e-4 breaks ties toward the most recently submitted.
    Priorities are not in the cost: the program minimises each priority tier's
    cost in its own stage, highest tier first, so lower priorities go first.
    """
    if not victims:
        return {}
    lost = {j.name: j.total_gpus * (j.checkpoint_age_s if j.checkpoint_age_s is not None
                                    else cfg.default_checkpoint_age_s) for j in victims}
    top = max(lost.values()) or 1.0
    recency = sorted(victims, key=lambda j: (-j.submitted_at, j.name))
    rank = {j.name: r for r, j in enumerate(recency)}
    n = len(victims)
    return {j.name: max(lost[j.name] / top, 1e-3) + 1e-4 * (rank[j.name] + 1) / (n + 1) for j in victims}


@dataclass(frozen=True)
class GpuLimits:
    """What telemetry says about GPUs, as far as placement cares."""

    busy: frozenset[tuple[str, int]] = frozenset()  # no new fractional job
    memory_free_mib: dict = field(default_factory=dict)  # (node, gpu) -> (free, total)
    idle_jobs: dict = field(default_factory=dict)  # running job -> seconds idle

    def room_for_fraction(self, node: str, gpu: int, fraction: float) -> bool:
        if (node, gpu) in self.busy:
            return False
        free, total = self.memory_free_mib.get((node, gpu), (None, None))
        return free is None or total is None or free >= fraction * total


def find_candidates(s: Scenario, layout: Layout, fair: dict[str, int], before: dict[str, float],
                    cfg: PlannerConfig, limits: GpuLimits | None = None) -> Candidates:
    limits = limits or GpuLimits()
    pending = [j for j in s.jobs if not j.is_running]
    st = standing(s, fair, before)
    running = [j for j in s.jobs if j.is_running]
    victims = [v for v in running if any(legal_victim(v, p, st) for p in pending)]
    cost = victim_costs(victims, cfg)
    held: dict[str, list[tuple[float, str, int]]] = defaultdict(list)  # node -> victims' healthy GPUs
    for name, nl in layout.nodes.items():
        count: dict[str, int] = defaultdict(int)
        for i, slot in enumerate(nl.slots):
            if slot.whole in cost and nl.healthy(i):
                count[slot.whole] += 1
        held[name] = sorted((cost[v], v, g) for v, g in count.items())
    free = {name: len(nl.free_indices()) for name, nl in layout.nodes.items()}
    free0, held0 = dict(free), dict(held)  # the real cluster; free and held become virtual

    nodes = _distinct_nodes(s, layout, pending)
    fractions = sum(j.replicas for j in pending if j.is_fractional)
    out = Candidates(standing=st, victims=[], cost=cost)
    # In claim order, each job's candidates are judged on what earlier jobs left: a greedy
    # pass reserves room for each job, so candidate lists spread over the cluster instead of
    # all naming the same best nodes, and the greedy placement is always among them.
    claim_order = sorted(pending, key=lambda j: (j.queue not in st.below_deserved, j.queue not in st.below_share,
                                                 -j.priority, j.submitted_at, j.name))
    whole: dict[str, list[str]] = {}
    for job in claim_order:
        legal = {v.name for v in victims if legal_victim(v, job, st)}
        if any(v.queue != job.queue for v in victims if v.name in legal):
            q = s.queue(job.queue)
            out.receivers[q.name] = fair[q.name] if q.name in st.below_share else q.deserved
        if job.is_fractional:
            out.gpus[job.name] = _fraction_slots(job, nodes, layout, legal, fractions, cfg, limits)
        else:
            whole[job.name] = _whole_nodes(job, nodes, free, held, legal, cfg, free0, held0)
            _reserve(job, whole[job.name], free, held, legal)
    out.nodes = {j.name: whole[j.name] for j in pending if j.name in whole}
    useful = {n for ns in out.nodes.values() for n in ns} | {n for gs in out.gpus.values() for n, _ in gs}
    out.victims = [v for v in victims if useful & set(v.running)]
    out.cost = {v.name: cost[v.name] for v in out.victims}
    out.idle = {v.name: limits.idle_jobs[v.name] for v in out.victims
                if v.name in limits.idle_jobs and v.queue in st.reclaimable}
    return out


def _distinct_nodes(s: Scenario, layout: Layout, pending: list[Job]) -> list[Node]:
    """All nodes but surplus copies of identical empty ones (they are interchangeable)."""
    replicas = sum(j.replicas for j in pending)
    kept, seen = [], defaultdict(int)
    for node in s.nodes:
        if all(slot.free for slot in layout.nodes[node.name].slots):
            key = (node.gpus, node.gpu_model, node.cpu, node.memory_gib, tuple(sorted(node.unhealthy_gpus)))
            seen[key] += 1
            if seen[key] > replicas:
                continue
        kept.append(node)
    return kept


def _fits_node(job: Job, node: Node) -> bool:
    if not job.fits_model(node):
        return False
    if node.cpu is not None and (job.cpu or 0) > node.cpu + _EPS:
        return False
    if node.memory_gib is not None and (job.memory_gib or 0) > node.memory_gib + _EPS:
        return False
    need = 1 if job.is_fractional else job.gpus
    return len(node.healthy_gpus) >= need


def _whole_nodes(job: Job, nodes: list[Node], free: dict[str, int], held: dict[str, list[tuple[float, str, int]]],
                 legal: set[str], cfg: PlannerConfig, free0: dict[str, int],
                 held0: dict[str, list[tuple[float, str, int]]]) -> list[str]:
    """Candidate nodes of a whole-GPU job, ranked on what earlier jobs left (`free`, `held`).

    Reservations only rank: on clusters of at most `exact_nodes` nodes every node the
    job could use in the real cluster (`free0`, `held0`) stays a candidate. Larger
    clusters keep the best `candidate_nodes_per_job` of the ranking, and fall back on
    the real cluster only when earlier jobs left this one nothing.
    """
    fitting = [n for n in nodes if _fits_node(job, n)]
    small = len(fitting) <= cfg.exact_nodes
    k = len(fitting) if small else cfg.candidate_nodes_per_job
    ranked = _rank_nodes(job, fitting, free, held, legal, k)
    if ranked and not small:
        return ranked
    seen = set(ranked)
    real = [n for n in _rank_nodes(job, fitting, free0, held0, legal, len(fitting)) if n not in seen]
    return ranked + real[: len(real) if small else k]


def _rank_nodes(job: Job, nodes: list[Node], free: dict[str, int], held: dict[str, list[tuple[float, str, int]]],
                legal: set[str], k: int) -> list[str]:
    """Nodes with room now (best fit first), then nodes where legal victims would free
    room (cheapest first); at most `k`, half from each list when both are long."""
    room_now, reclaim = [], []
    for node in nodes:
        have = free[node.name]
        if have >= job.gpus:
            room_now.append((have, node.name))
            continue
        spent = 0.0
        for c, victim, gpus in held.get(node.name, ()):
            if victim in legal:
                have, spent = have + gpus, spent + c
                if have >= job.gpus:
                    reclaim.append((spent, node.name))
                    break
    room_now.sort()
    reclaim.sort()
    if len(room_now) + len(reclaim) <= k:
        return [n for _, n in room_now + reclaim]
    take_now = min(len(room_now), max(k // 2, k - len(reclaim)))
    return [n for _, n in room_now[:take_now] + reclaim[: k - take_now]]


def _reserve(job: Job, chosen: list[str], free: dict[str, int], held: dict[str, list[tuple[float, str, int]]],
             legal: set[str]) -> None:
    """Greedily place the job's replicas on its first candidates that fit, taking
    legal victims where needed, and record what that uses up."""
    for _ in range(job.replicas):
        for n in chosen:
            freeable = [(c, v, g) for c, v, g in held.get(n, ()) if v in legal]
            taken, room = [], free[n]
            for item in freeable:
                if room >= job.gpus:
                    break
                taken.append(item)
                room += item[2]
            if room >= job.gpus:
                held[n] = [item for item in held[n] if item not in taken]
                free[n] = room - int(job.gpus)
                break
        else:
            return  # no room for this replica: the job will likely wait


def _fraction_slots(job: Job, nodes: list[Node], layout: Layout, legal: set[str], fractions: int,
                    cfg: PlannerConfig, limits: GpuLimits) -> list[tuple[str, int]]:
    """GPUs a fractional job could share: with room now, free, or held by legal victims;
    never a busy GPU or one without the framebuffer the fraction needs.

    Free GPUs of one node are interchangeable, so each node offers only as many
    as there are fractional replicas waiting in the whole scenario.
    """
    slots: list[tuple[float, str, int]] = []
    for node in nodes:
        if not _fits_node(job, node):
            continue
        nl = layout.nodes[node.name]
        free_taken = 0
        for i, sl in enumerate(nl.slots):
            if not nl.healthy(i):
                continue
            if not sl.free and not limits.room_for_fraction(node.name, i, job.gpus):
                continue
            if sl.free:
                if free_taken < fractions:
                    slots.append((1.0, node.name, i))
                    free_taken += 1
                continue
            freed = sum(f for name, f in sl.fractions if name in legal)
            if sl.whole in legal:
                freed = 1.0
            room = 1.0 - sl.used + freed
            if room >= job.gpus - _EPS:
                slots.append((room, node.name, i))  # least room first: best fit
    slots.sort()
    if len(nodes) <= cfg.exact_nodes:
        return [(n, i) for _, n, i in slots]
    return [(n, i) for _, n, i in slots[: cfg.candidate_nodes_per_job * max(job.replicas, fractions)]]
