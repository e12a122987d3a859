"""A scheduler with KAI-Scheduler's documented semantics, written from its docs
(docs/fairness, docs/queues, docs/priority, docs/developer/action-framework.md
and scheduler-concepts.md of NVIDIA/KAI-Scheduler); docs/simulate.md lists the
rules it keeps and what it simplifies.

Each round is one scheduling cycle over a snapshot, its actions in KAI's order:

1. **allocate**: queues furthest below their fair share first (lowest
   allocated / fair share), each queue's jobs oldest first, bin-packed on the
   fullest node that fits; a queue may use idle GPUs beyond its fair share.
2. **consolidate**: a job that fits nowhere may start when moving running jobs to
   other nodes frees room for it; nothing is evicted unless every moved job has
   a place to go.
3. **reclaim**: a queue below its fair share takes GPUs from queues above theirs,
   so long as every victim's queue stays at least as saturated (allocated / fair
   share) as the reclaimer ends up; failing that, a queue that stays within its
   deserved quota takes from queues above their quota. Victims: the most saturated
   queue first, the youngest job first; only those on the nodes the job gets.
4. **preempt** (inside a queue, by priority): every job here has one priority,
   so it never acts.

A job that has run less than the minimum runtime (KAI's min-runtime plugin, the
simulator's `min_runtime_s`) is neither a victim nor moved. Victims are evicted as
Kubernetes evicts a pod: SIGTERM, then SIGKILL after the pod's 30 s grace period.
"""

from __future__ import annotations

import math

from gpu_policy.sim.teams.cluster import best_fit, give_back, take
from gpu_policy.sim.teams.jobs import Decision, RoundView, SimJob
from gpu_policy.sim.teams.shares import team_shares
from gpu_policy.sim.teams.stopping import KUBERNETES
from gpu_policy.sim.teams.trace import GPUS_PER_NODE


def saturation(held: float, fair: float) -> float:
    """Allocated / fair share: KAI's order for serving and reclaiming queues."""
    return held / fair if fair > 0 else (math.inf if held > 0 else 0.0)


class KaiLikePolicy:
    name = "kai-like"
    eviction = KUBERNETES  # a victim gets its pod's 30 s grace period, and nobody asks it to save

    def decide(self, view: RoundView) -> Decision:
        held = view.held()
        demand = dict(held)
        for job in view.waiting:
            demand[job.team] += job.gpus
        fair = self.fair_shares(view, demand)
        decision = Decision()
        left = self._allocate(view, held, fair, decision)
        left = self._consolidate(view, left, decision)
        self._reclaim(view, left, held, fair, decision)
        return decision

    def fair_shares(self, view: RoundView, demand: dict[str, int]) -> dict[str, int]:
        """Each queue's fair share on this demand: the planner's rule, which is KAI's documented one."""
        return team_shares(view.quotas, demand, view.gpus).fair

    def _in_queue_order(self, jobs: list[SimJob], held: dict[str, int], fair: dict[str, int]):
        """Jobs one at a time: the least saturated queue's oldest job next,
        re-judged after each (a job is yielded once, started or not)."""
        queues: dict[str, list[SimJob]] = {}
        for job in sorted(jobs, key=lambda j: (j.spec.arrival_s, j.name), reverse=True):
            queues.setdefault(job.team, []).append(job)
        while queues:
            team = min(queues, key=lambda q: (saturation(held[q], fair[q]), q))
            yield queues[team].pop()
            if not queues[team]:
                del queues[team]

    def _allocate(self, view: RoundView, held: dict[str, int], fair: dict[str, int],
                  decision: Decision) -> list[SimJob]:
        left = []
        for job in self._in_queue_order(view.waiting, held, fair):
            nodes = best_fit(view.free, job.spec)
            if nodes is None:
                left.append(job)
                continue
            take(view.free, job.spec, nodes)
            held[job.team] += job.gpus
            decision.start[job.name] = nodes
        return left

    def _consolidate(self, view: RoundView, jobs: list[SimJob], decision: Decision) -> list[SimJob]:
        left = []
        hopeless = math.inf  # GPUs per replica that no consolidation found room for this round
        for job in jobs:
            need = job.spec.gpus_per_replica
            if need >= hopeless or sum(view.free) < job.gpus:
                left.append(job)
                continue
            plan = self._make_room(view, job, decision)
            if plan is None:
                hopeless = min(hopeless, need)
                left.append(job)
                continue
            moves, nodes = plan
            for moved, (src, dst) in moves.items():
                give_back(view.free, moved.spec, (src,))
                take(view.free, moved.spec, (dst,))
                decision.move[moved.name] = (dst,)
            take(view.free, job.spec, nodes)
            decision.start[job.name] = nodes
        return left

    def _make_room(self, view: RoundView, job: SimJob, decision: Decision):
        """Moves of one-node jobs that empty room for each replica of `job`, fewest
        GPUs moved first: ({moved job: (from, to)}, the job's nodes), or None."""
        free = list(view.free)
        on_node: dict[int, list[SimJob]] = {}
        for r in view.running:
            if r.spec.replicas == 1 and r.name not in decision.move and not view.protected(r):
                on_node.setdefault(r.nodes[0], []).append(r)
        need = job.spec.gpus_per_replica
        chosen: list[int] = []
        moves: dict[SimJob, tuple[int, int]] = {}
        for _ in range(job.spec.replicas):
            best = None
            for node in range(len(free)):
                if node in chosen:
                    continue
                trial = self._empty_enough(free, node, need, on_node.get(node, []), frozenset(chosen) | {node})
                if trial is not None and (best is None or trial[0] < best[0]):
                    best = (trial[0], node, trial[1], trial[2])
            if best is None:
                return None
            _, node, relocations, free = best
            chosen.append(node)
            for moved, dst in relocations.items():
                moves[moved] = (node, dst)
                on_node[node].remove(moved)
                on_node.setdefault(dst, []).append(moved)
        return moves, tuple(chosen)

    @staticmethod
    def _empty_enough(free: list[int], node: int, need: int, jobs: list[SimJob], keep_out: frozenset[int]):
        """Move the smallest jobs off `node`, each to its best fit elsewhere, until
        `need` GPUs are free there: (GPUs moved, {job: destination}, free after)."""
        if free[node] >= need:
            return 0, {}, list(free)
        trial, moved, relocations = list(free), 0, {}
        for r in sorted(jobs, key=lambda j: (j.gpus, j.name)):
            dst = best_fit(trial, r.spec, keep_out)
            if dst is None:
                continue
            take(trial, r.spec, dst)
            give_back(trial, r.spec, (node,))
            relocations[r] = dst[0]
            moved += r.gpus
            if trial[node] >= need:
                return moved, relocations, trial
        return None

    def _reclaim(self, view: RoundView, jobs: list[SimJob], held: dict[str, int], fair: dict[str, int],
                 decision: Decision) -> None:
        touched = set(decision.start) | set(decision.move)
        for job in self._in_queue_order(jobs, held, fair):
            for tier in ("fair-share", "quota"):
                victims = self._victims(view, job, tier, held, fair, touched)
                if victims is not None:
                    nodes, chosen = victims
                    for v in chosen:
                        give_back(view.free, v.spec, v.nodes)
                        held[v.team] -= v.gpus
                        decision.preempt.append(v.name)
                        touched.add(v.name)
                    take(view.free, job.spec, nodes)
                    held[job.team] += job.gpus
                    decision.start[job.name] = nodes
                    touched.add(job.name)
                    break

    def _victims(self, view: RoundView, job: SimJob, tier: str, held: dict[str, int], fair: dict[str, int],
                 touched: set[str]):
        """Victims that make room for `job` in a reclaim tier, and where it goes; None
        when the tier does not apply or cannot free enough."""
        gpus = job.gpus
        bounds = _tier_bounds(view, job, tier, held, fair)
        if bounds is None:
            return None
        floor, over = bounds
        candidates = sorted((r for r in view.running
                             if r.team in over and r.name not in touched and not view.protected(r)),
                            key=lambda r: (-saturation(held[r.team], fair[r.team]), -r.spec.arrival_s, r.name))
        free = list(view.free)
        taken = dict.fromkeys(over, 0)
        picked: list[SimJob] = []
        empty = sum(1 for room in free if room == GPUS_PER_NODE)
        for r in candidates:
            left = held[r.team] - taken[r.team]
            allowed = left - r.gpus >= floor[r.team] if tier == "fair-share" else left > floor[r.team]
            if not allowed:
                continue
            taken[r.team] += r.gpus
            picked.append(r)
            for n in r.nodes:
                free[n] += r.spec.gpus_per_replica
                empty += free[n] == GPUS_PER_NODE
            fits = (empty >= job.spec.replicas if job.spec.replicas > 1
                    else any(free[n] >= gpus for n in r.nodes))
            if fits:
                nodes = best_fit(free, job.spec)
                return nodes, [v for v in picked if set(v.nodes) & set(nodes)]
        return None


def _tier_bounds(view: RoundView, job: SimJob, tier: str, held: dict[str, int],
                 fair: dict[str, int]) -> tuple[dict[str, float], set[str]] | None:
    """KAI's reclaim tier for `job`: what each victim queue keeps at least, and the queues
    that may give (above their fair share, or their quota); None when the tier does not
    apply to the job's queue."""
    team, gpus = job.team, job.gpus
    if tier == "fair-share":
        if held[team] >= fair[team]:
            return None
        after = saturation(held[team] + gpus, fair[team])
        return {q: fair[q] * after for q in held}, {q for q in held if q != team and held[q] > fair[q]}
    if held[team] + gpus > view.quotas[team]:
        return None
    return dict(view.quotas), {q for q in held if q != team and held[q] > view.quotas[q]}
