"""The policy's rules, each in one function (../shared/spec/scenario-and-plan.md, "Policy
semantics"; docs/policy.md says why each rule is what it is).

The integer program, the reasons a plan gives and any other policy (the simulators)
call these functions; none of them restates a rule. They work on plain numbers
(GPUs a queue holds, its shares) so that a caller can judge a state before or after
a plan, or a state it only imagines.

Vocabulary: an *entity* is a queue or a department (a queue with child queues);
*leaves* are queues that hold jobs. Reclaim has two *tiers*: ``FAIR`` (a queue above
its fair share gives to one that ends at or below its own) and ``GUARANTEE`` (a
queue above its deserved quota gives to one that ends at or below its deserved).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from gpu_policy.fair_share import fair_shares, queue_demands
from gpu_policy.model import Job, Scenario

FAIR, GUARANTEE = "fair share", "guarantee"
TIERS = (FAIR, GUARANTEE)

#: Slack for comparing GPU amounts that are sums of fractions.
EPS = 1e-6


@dataclass(frozen=True)
class QueueTree:
    """Queues and departments: who is whose parent, and the walks between them."""

    parent: dict[str, str | None]

    @classmethod
    def of(cls, s: Scenario) -> QueueTree:
        return cls({q.name: q.parent for q in s.queues})

    @cached_property
    def children(self) -> dict[str | None, list[str]]:
        kids: dict[str | None, list[str]] = {None: []}
        for name in self.parent:
            kids.setdefault(name, [])
        for name, parent in self.parent.items():
            kids[parent].append(name)
        return kids

    @cached_property
    def leaves(self) -> list[str]:
        return [name for name in self.parent if not self.children[name]]

    @cached_property
    def departments(self) -> list[str]:
        return [name for name in self.parent if self.children[name]]

    def path(self, name: str) -> list[str]:
        """`name`, its department, that department's department, ... up to the top."""
        out = []
        node: str | None = name
        while node is not None:
            out.append(node)
            node = self.parent[node]
        return out

    def depth(self, name: str) -> int:
        return len(self.path(name)) - 1

    def leaves_under(self, name: str) -> list[str]:
        kids = self.children[name]
        return [name] if not kids else [leaf for kid in kids for leaf in self.leaves_under(kid)]

    def judged(self, receiver: str, giver: str) -> tuple[list[str], list[str]]:
        """The department walk of a reclaim from queue `giver` to queue `receiver`.

        Reclaim is judged between the children of the two queues' lowest common
        ancestor. Returns the entities on each side from the leaf up to that child
        (receiver side first); the program checks the rules at every one of them.
        """
        up_r, up_g = self.path(receiver), self.path(giver)
        common = set(up_r) & set(up_g)
        return [e for e in up_r if e not in common], [e for e in up_g if e not in common]


@dataclass(frozen=True)
class Shares:
    """What each entity is owed: fair share, guarantee, deserved quota, limit."""

    fair: dict[str, int]
    guarantee: dict[str, float]  # min(deserved, demand): owed before any fair share beyond it
    deserved: dict[str, float]
    limit: dict[str, float | None]
    demand: dict[str, float]

    @classmethod
    def of(cls, s: Scenario, fair: dict[str, int] | None = None) -> Shares:
        demands = queue_demands(s)
        fair = fair if fair is not None else fair_shares(s)
        return cls(
            fair=dict(fair),
            guarantee={q.name: min(q.deserved, demands[q.name].total) for q in s.queues},
            deserved={q.name: q.deserved for q in s.queues},
            limit={q.name: q.limit for q in s.queues},
            demand={q.name: demands[q.name].total for q in s.queues},
        )


def floor(shares: Shares, entity: str, tier: str) -> float:
    """What a giving entity must stay above: its fair share, or its deserved quota
    in the guarantee tier."""
    return shares.fair[entity] if tier == FAIR else shares.deserved[entity]


def cap(shares: Shares, entity: str, tier: str) -> float:
    """What a receiving entity may end with at most: its fair share, or its deserved
    quota in the guarantee tier."""
    return shares.fair[entity] if tier == FAIR else shares.deserved[entity]


def keeps_floor(held_before: float, lost: float, largest: float, floor_: float) -> bool:
    """Each victim is needed above the floor: after losing all its victims but the
    largest, the entity still holds more than its floor."""
    return held_before - (lost - largest) > floor_ + EPS


def may_give(shares: Shares, entity: str, held_before: float, tier: str) -> bool:
    """Could this entity lose any GPU to reclaim in `tier` (one victim at least)?"""
    return held_before > floor(shares, entity, tier) + EPS


def may_receive(shares: Shares, entity: str, held_before: float, gpus: float, tier: str) -> bool:
    """Could this entity take `gpus` more by reclaim in `tier` and end within its cap?"""
    return held_before + gpus <= cap(shares, entity, tier) + EPS


def reclaim_tiers(tree: QueueTree, shares: Shares, held_before: dict[str, float], receiver: str, giver: str,
                  gpus: float) -> list[str]:
    """Tiers in which queue `giver`'s jobs may ever be reclaimed for a `gpus`-GPU job of
    queue `receiver`, judged on the state before the plan (a necessary condition: the
    program then judges the state after it). The receiving queue must have room for the
    job, every entity on the giving side must be above its floor; the receiving side's
    departments are judged after the plan only (they may lose work inside at the same
    time). Empty for the same queue."""
    if receiver == giver:
        return []
    _, up_g = tree.judged(receiver, giver)
    return [tier for tier in TIERS
            if may_receive(shares, receiver, held_before[receiver], gpus, tier)
            and all(may_give(shares, e, held_before[e], tier) for e in up_g)]


def may_preempt_inside(victim: Job, job: Job) -> bool:
    """Preemption inside a queue: only a strictly higher priority preempts."""
    return victim.is_preemptible and victim.queue == job.queue and victim.priority < job.priority


def most_idle_for_inside_victim(victim: Job) -> float:
    """Preempt inside a queue only for GPUs the queue's starts need: the GPUs the plan
    leaves idle (fractions counted by size: moves could gather them) are fewer than the
    victim's, so it could not run on them. Otherwise the preemption would only turn its
    queue's higher-priority start from borrowing into a claim, and the next plan would
    gather the idle GPUs and restart the victim. The most GPUs a plan that preempts
    `victim` for its own queue may leave idle."""
    return victim.total_gpus - 1e-3


def gathered_by_moves(victim: Job) -> bool:
    """Whether idle GPUs in the cluster, counted by amount, say the victim could run once
    moves gather them: for replicas of at most one GPU (fractions, single GPUs) moves of
    fractions can gather a GPU anywhere; a replica of several GPUs needs them on one node,
    which idle GPUs spread over nodes do not give."""
    return victim.gpus <= 1


def limit_bound(shares: Shares, entity: str, held_before: float) -> float | None:
    """Most GPUs the entity may hold after the plan: its limit, or what it already holds
    when that is more (a limit lowered below use preempts nothing). None: no limit."""
    limit = shares.limit[entity]
    return None if limit is None else max(limit, held_before)


def limit_blocker(tree: QueueTree, shares: Shares, held: dict[str, float], queue: str, gpus: float) -> str | None:
    """The first entity, from the queue up, whose limit `gpus` more would break."""
    for e in tree.path(queue):
        bound = shares.limit[e]
        if bound is not None and held[e] + gpus > bound + EPS:
            return e
    return None


def nonpreemptible_bound(shares: Shares, entity: str, held_nonpreemptible: float) -> float:
    """Most non-preemptible GPUs the entity may hold after starting non-preemptible work:
    its deserved quota (never less than what already runs: nothing is preempted for it)."""
    return max(shares.deserved[entity], held_nonpreemptible)


def nonpreemptible_blocker(tree: QueueTree, shares: Shares, held_nonpreemptible: dict[str, float], queue: str,
                           gpus: float) -> str | None:
    """Non-preemptible jobs start only while the queue and every department above it stay
    within deserved in non-preemptible GPUs: the first entity that would not, or None."""
    for e in tree.path(queue):
        if held_nonpreemptible[e] + gpus > nonpreemptible_bound(shares, e, held_nonpreemptible[e]) + EPS:
            return e
    return None


def relative_share(allocated: float, gpus: float, deserved: float, fair: float) -> float:
    """Who starts first among tied plans: the smallest (allocated + the job's GPUs) /
    max(deserved, fair share)."""
    base = max(deserved, fair)
    return (allocated + gpus) / base if base > EPS else float("inf")


def lost_work(job: Job, default_age_s: float) -> float:
    """GPU-seconds since the job's last checkpoint: what preempting or moving it loses (an
    unknown age counts as `default_age_s`)."""
    age = job.checkpoint_age_s if job.checkpoint_age_s is not None else default_age_s
    return job.total_gpus * age


def victim_order_key(job: Job, lost_work: float) -> tuple:
    """Among valid victims prefer lowest priority, least lost work, most recently submitted."""
    return (job.priority, lost_work, -job.submitted_at, job.name)


def start_order(tree: QueueTree, shares: Shares, held: dict[str, float], waiting: list[Job]) -> list[Job]:
    """Who starts first. Inside a queue: higher priority, then older. Across queues: work
    that keeps its queue within its guarantee, then within its fair share, then the
    smallest relative share (departments compared first, then the queues inside them),
    then higher priority, then older (submitted_at), then the name."""
    by_queue: dict[str, list[Job]] = {}
    for job in sorted(waiting, key=lambda j: (-j.priority, j.submitted_at, j.name)):
        by_queue.setdefault(job.queue, []).append(job)
    keyed = []
    for q, jobs in by_queue.items():
        top_down = list(reversed(tree.path(q)))
        ahead = 0.0
        for job in jobs:
            after = held[q] + ahead + job.total_gpus
            shares_key = tuple(relative_share(held[e] + ahead, job.total_gpus, shares.deserved[e], shares.fair[e])
                               for e in top_down)
            keyed.append(((after > shares.guarantee[q] + EPS, after > shares.fair[q] + EPS, shares_key,
                           -job.priority, job.submitted_at, job.name), job))
            ahead += job.total_gpus
    return [job for _, job in sorted(keyed, key=lambda x: x[0])]


def best_fill(amounts: list[float], share: float) -> float:
    """The most GPUs a set of jobs of these sizes holds without going above `share` (jobs are
    indivisible): how much of a queue's work counts toward its share."""
    milli = [round(a * 1000) for a in amounts if a > EPS]
    limit = round(share * 1000)
    if sum(milli) <= limit:
        return sum(milli) / 1000
    unit = math.gcd(*milli)
    reach, mask = 1, (1 << (limit // unit + 1)) - 1  # bit k: some subset sums to k units
    for a in milli:
        reach |= (reach << (a // unit)) & mask
    return (reach.bit_length() - 1) * unit / 1000


def may_swap_back(victim: Job, starter: Job) -> bool:
    """Could `victim`, preempted by a plan that starts `starter` of its queue, take
    `starter`'s place in the next plan? Only a strictly higher priority preempts inside a
    queue, and only where the starter's GPUs could hold the victim's replicas: a whole-GPU
    starter frees whole GPUs, each of which holds one fractional replica; a fractional
    starter frees fractions, which may share one GPU (so k of them make room for a
    fraction up to k times their size), and never a whole GPU for sure."""
    if not may_preempt_inside(starter, victim):
        return False
    if victim.is_fractional:
        if not starter.is_fractional:
            return victim.replicas <= starter.replicas * int(starter.gpus)
        per_place = math.ceil(victim.gpus / starter.gpus - EPS)  # starter replicas one victim replica needs
        return victim.replicas <= starter.replicas // per_place
    if starter.is_fractional:
        return False
    return victim.gpus <= starter.gpus and victim.replicas <= starter.replicas * (starter.gpus // victim.gpus)
