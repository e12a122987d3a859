"""The words every rule uses, in one place: the queue tree, what each entity is owed
(`Shares`: fair share, guarantee = min(deserved, demand), deserved, limit), the two reclaim
tiers and their floors and caps, and the rows' margin (`STRICT`); the one tolerance for
comparing GPU amounts is the model's (`gpu_policy.model.EPS`).

An *entity* is a queue or a department (a queue with child queues); *leaves* are queues
that hold jobs. Reclaim has two *tiers*: ``FAIR`` (a queue above its fair share gives to
one that ends at or below its own) and ``GUARANTEE`` (a queue above its deserved quota
gives to one that ends at or below its deserved).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from gpu_policy.model import Scenario
from gpu_policy.model.plan import fair_share_words
from gpu_policy.planner.core.fair_share import QueueDemand, fair_shares, queue_demands


FAIR, GUARANTEE = "fair share", "guarantee"
TIERS = (FAIR, GUARANTEE)

#: How much more "more than" means in the program's rows: above the solver's feasibility
#: tolerance (1e-6), below the finest amount (1/1000 GPU), so a strict inequality on amounts
#: reads the same as the rule.
STRICT = 1e-4


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

    def rolled_up(self, leaf: dict[str, float]) -> dict[str, float]:
        """Per entity, the sum of a per-queue amount over the queues under it."""
        return {name: sum(leaf.get(x, 0.0) for x in self.leaves_under(name)) for name in self.parent}

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
    without_usage: dict[str, int] | None = None  # the fair shares past usage changed, as they were without it

    @classmethod
    def of(cls, s: Scenario, fair: dict[str, int] | None = None,
           demands: dict[str, QueueDemand] | None = None, without_usage: dict[str, int] | None = None) -> Shares:
        """`fair`: `fair_shares(s)` unless given; `demands`: `queue_demands(s)`, when the
        caller has them (a pass over every job); `without_usage`: the shares without past
        usage, where it counts."""
        demands = queue_demands(s) if demands is None else demands
        fair = fair if fair is not None else fair_shares(s, demands=demands)
        return cls(
            fair=dict(fair),
            guarantee={q.name: min(q.deserved, demands[q.name].total) for q in s.queues},
            deserved={q.name: q.deserved for q in s.queues},
            limit={q.name: q.limit for q in s.queues},
            demand={q.name: demands[q.name].total for q in s.queues},
            without_usage=None if without_usage is None else dict(without_usage),
        )

    def fair_words(self, entity: str) -> str:
        """`entity`'s fair share in words, with what past usage changed."""
        return fair_share_words(self.fair[entity], None if self.without_usage is None else self.without_usage[entity])


def floor(shares: Shares, entity: str, tier: str) -> float:
    """What a giving entity must stay above: its fair share, or its deserved quota
    in the guarantee tier."""
    return shares.fair[entity] if tier == FAIR else shares.deserved[entity]


def cap(shares: Shares, entity: str, tier: str) -> float:
    """What a receiving entity may end with at most: its fair share, or its deserved
    quota in the guarantee tier."""
    return shares.fair[entity] if tier == FAIR else shares.deserved[entity]
