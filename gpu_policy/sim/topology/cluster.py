"""The simulated cluster: blocks of racks of nodes, labelled as a Kueue `Topology` would
describe them, and the free GPUs of each node."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_policy.model import Node, TopologyLevel

#: Node labels of the levels, widest first (Kueue's documented example labels).
BLOCK_LABEL = "cloud.provider.com/topology-block"
RACK_LABEL = "cloud.provider.com/topology-rack"
LEVELS = (TopologyLevel("block", BLOCK_LABEL), TopologyLevel("rack", RACK_LABEL))
#: Level names, widest first, then the node itself.
LEVEL_NAMES = ("block", "rack", "node")


@dataclass(frozen=True)
class Shape:
    """Sizes of the hierarchy."""
    blocks: int = 4
    racks_per_block: int = 8
    nodes_per_rack: int = 8
    gpus: int = 8

    @property
    def nodes(self) -> int:
        return self.blocks * self.racks_per_block * self.nodes_per_rack

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus

    def nodes_per(self, level: str) -> int:
        """Nodes in one domain of `level`."""
        return {"block": self.racks_per_block * self.nodes_per_rack, "rack": self.nodes_per_rack, "node": 1}[level]

    def domain(self, node: int, level: str) -> int:
        """The index of the node's domain at `level` (racks numbered across blocks)."""
        return node // self.nodes_per(level)

    def node_name(self, n: int) -> str:
        return f"node-{n}"

    def scenario_nodes(self) -> list[Node]:
        """The nodes as a scenario describes them, with their block and rack labels."""
        return [Node(self.node_name(n), self.gpus,
                     labels={BLOCK_LABEL: f"b{self.domain(n, 'block'):03d}", RACK_LABEL: f"r{self.domain(n, 'rack'):03d}"})
                for n in range(self.nodes)]


class Cluster:
    """Free GPUs per node; policies read it, the engine changes it."""

    def __init__(self, shape: Shape):
        self.shape = shape
        self.free = np.full(shape.nodes, shape.gpus, dtype=np.int64)

    def take(self, nodes: tuple[int, ...], gpus: int) -> None:
        for n in nodes:
            if self.free[n] < gpus:
                raise ValueError(f"node-{n} has {self.free[n]} free GPUs, a replica asks {gpus}")
            self.free[n] -= gpus

    def give(self, nodes: tuple[int, ...], gpus: int) -> None:
        for n in nodes:
            self.free[n] += gpus

    @property
    def allocated(self) -> int:
        return int(self.shape.total_gpus - self.free.sum())
