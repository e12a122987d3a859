"""The cluster's network hierarchy as domains (docs/topology.md): for each level of the
scenario's `topology:` (widest first), the nodes that share the values of its label and of
every wider level's label. A node without one of those labels is in no domain of that level
(nor of any narrower one), as Kueue keeps nodes without every level's label out of its tree.
A domain is named by its values, widest first: `b1/r2` is rack r2 of block b1, not of b2. A
level labelled `kubernetes.io/hostname` is the node itself, labelled or not (Kueue's and the
contract's rule)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_policy.model.scenario import Scenario

#: A domain's identity: the values of its level's label and of every wider level's, widest first.
DomainKey = tuple[str, ...]
#: The label of a level whose domains are single nodes.
HOSTNAME = "kubernetes.io/hostname"


@dataclass
class Domains:
    """The domains of each level, with their nodes in the scenario's order."""

    levels: list[str]                                   # level names, widest first
    of_node: list[dict[str, DomainKey]] = field(default_factory=list)  # per level: node -> its domain there
    nodes: list[dict[DomainKey, list[str]]] = field(default_factory=list)  # per level: domain -> its nodes

    @classmethod
    def of(cls, s: Scenario) -> Domains:
        out = cls([level.name for level in s.topology])
        out.of_node = [{} for _ in s.topology]
        out.nodes = [{} for _ in s.topology]
        for n in s.nodes:
            values: list[str] = []
            for i, level in enumerate(s.topology):
                value = n.labels.get(level.label, n.name if level.label == HOSTNAME else None)
                if value is None:
                    break
                values.append(value)
                key = tuple(values)
                out.of_node[i][n.name] = key
                out.nodes[i].setdefault(key, []).append(n.name)
        return out

    def level(self, name: str) -> int:
        """The index of level `name`, widest first."""
        return self.levels.index(name)

    def domain(self, node: str, level: int) -> DomainKey | None:
        return self.of_node[level].get(node)

    def deepest(self, node: str) -> DomainKey | None:
        """The narrowest domain the node is in (None: in none)."""
        return next((mine[node] for mine in reversed(self.of_node) if node in mine), None)

    @staticmethod
    def name(key: DomainKey) -> str:
        """The domain as a person reads it: its values, widest first (`b1/r2`)."""
        return "/".join(key)
