"""The greedy scope's reclaim rankings (`gpu_policy.planner.core.scope`): per node, the
legal victims of a waiting job cheapest first, and per size the nodes where they free a
block of that size, cheapest first, ranked as the program's preemption stages rank victims."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Protocol

from gpu_policy.model import Job
from gpu_policy.model.layout import Layout


class RankingRules(Protocol):
    """What the rankings ask of the rules (`gpu_policy.planner.core.scope.ScopeRules` answers)."""

    def may_take(self, victim: Job, claimant: Job | None, givers: set[str]) -> bool:
        """Whether a start of `claimant` may take the running `victim`'s GPUs."""

    def victim_order_key(self, victim: Job, cost: tuple) -> tuple:
        """Among valid victims, the order they go in (lowest first)."""

    def add_cost(self, total: tuple, cost: tuple) -> tuple:
        """The cost of a set of victims (`total`) with one more."""


class ReclaimRankings:
    """Per node, the legal victims sorted cheapest first; per (victim set, size), the nodes
    where they free a block of that size, cheapest first. Built once, then looked up; a
    node's victims are found, costed and sorted only once a lookup needs them."""

    def __init__(self, layout: Layout, free: dict[str, int], alike: dict[Hashable, list[Job]], rules: RankingRules,
                 cost: Callable[[Job], tuple]):
        """`free`: each node's free GPUs; `alike`: the legal victims by `ScopeRules.victim_key`;
        `cost`: a victim's cost (asked of those the rankings look at only)."""
        self.layout, self.free, self.rules, self.costing = layout, free, rules, cost
        self.alike = alike
        self.jobs = {j.name: j for group in alike.values() for j in group}
        self.cost: dict[str, tuple] = {}
        self.order: dict[str, tuple] = {}  # victim -> its order key (`_order`)
        self.held_on: dict[str, dict[str, int]] = {}  # node -> `held`, once asked for
        self.memo: dict[tuple, dict[int, list[str]]] = {}
        self.legal_on_node: dict[tuple, dict[str, list[tuple[Job, int]]]] = {}
        self.cursor: dict[tuple, int] = {}

    def _legal(self, victim: Job, job: Job, givers: set[str]) -> bool:
        """Whether `job` may take `victim`'s GPUs (its queue may take from the `givers`). It
        judges nothing of the victim but its `victim_key`."""
        return self.rules.may_take(victim, job, givers)

    def held(self, node: str) -> dict[str, int]:
        """The node's victims and the healthy GPUs each holds whole there."""
        if node not in self.held_on:
            nl, mine = self.layout.nodes[node], {}
            for i, slot in enumerate(nl.slots):
                if slot.whole in self.jobs and nl.healthy(i):
                    mine[slot.whole] = mine.get(slot.whole, 0) + 1
            self.held_on[node] = mine
        return self.held_on[node]

    def in_order(self, node: str, admitted: set[str] | None = None) -> list[tuple[Job, int]]:
        """The node's victims (those named in `admitted`; None: all) and the GPUs each holds
        there, in the order they go (`ScopeRules.victim_order_key`)."""
        mine = [(self.jobs[v], g) for v, g in self.held(node).items() if admitted is None or v in admitted]
        return sorted(mine, key=lambda x: self._order(x[0]))

    def _cost(self, victim: Job) -> tuple:
        if victim.name not in self.cost:
            self.cost[victim.name] = self.costing(victim)
        return self.cost[victim.name]

    def _order(self, victim: Job) -> tuple:
        """The victim's `ScopeRules.victim_order_key`, found once (every claimant's lookup sorts by it)."""
        if victim.name not in self.order:
            self.order[victim.name] = self.rules.victim_order_key(victim, self._cost(victim))
        return self.order[victim.name]

    def cut(self, node: str) -> list[Job]:
        """The node's victims of one replica, in the order they go."""
        return [v for v, _ in self.in_order(node) if len(v.running) == 1]

    def holds_gang(self, node: str) -> bool:
        """Whether a victim on the node has several replicas (which `cut` leaves out)."""
        return any(len(self.jobs[v].running) > 1 for v in self.held(node))

    def freed(self, node: str, job: Job, givers: set[str]) -> int:
        return sum(g for _, g in self.victims(job, givers).get(node, ()))

    @staticmethod
    def key(job: Job, givers: set[str]) -> tuple:
        """What decides which victims are legal for `job`."""
        return (frozenset(givers), job.queue, job.priority)

    def victims(self, job: Job, givers: set[str]) -> dict[str, list[tuple[Job, int]]]:
        """Per node (in cluster order), the victims legal for `job` and the GPUs each holds
        there. Victims alike in `_legality` are judged by one of them (`_legal`), and only
        the nodes running a victim judged legal are looked at."""
        key = self.key(job, givers)
        if key not in self.legal_on_node:
            legal = [v for alike in self.alike.values() if self._legal(alike[0], job, givers) for v in alike]
            admitted = {v.name for v in legal}
            looked_at = {n for v in legal for n in v.running}
            self.legal_on_node[key] = {n: mine for n in self.layout.nodes if n in looked_at
                                       if (mine := self.in_order(n, admitted))}
        return self.legal_on_node[key]

    def nodes(self, job: Job, need: int, givers: set[str], used: set[str], k: int,
              allowed: frozenset[str] | None = None) -> list[str]:
        """The `k` cheapest nodes not in `used`, among the `allowed` (None: all), where the
        victims legal for `job` free `need` GPUs usable by it, ranked by what they cost
        (`_rank`)."""
        key = self.key(job, givers)
        if key not in self.memo:
            self.memo[key] = self._rank(job, givers)
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

    def _rank(self, job: Job, givers: set[str]) -> dict[int, list[str]]:
        """Per size, the nodes where the victims legal for `job`, taken in victim order, free a
        block of that size, cheapest first: by the cost of the victims taken
        (rules.total_cost of rules.victim_cost, as the program's preemption stages count it:
        idle jobs of queues above their share first, then the lowest priority, then the least
        lost work, then the fewest). One pass over the nodes ranks every size at once."""
        ranked: dict[int, list] = defaultdict(list)
        for node, mine in self.victims(job, givers).items():
            have, cost = self.free[node], ()
            for v, g in mine:
                before, have = have, have + g
                cost = self.rules.add_cost(cost, self._cost(v))
                for size in range(before + 1, have + 1):
                    ranked[size].append((cost, node))
        return {size: [n for _, n in sorted(nodes)] for size, nodes in ranked.items()}
