"""What a policy sees in a round and what it decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gpu_policy.sim.topology.cluster import Cluster
from gpu_policy.sim.topology.workload import Gang


@dataclass
class View:
    """The cluster at a round: free GPUs, running jobs and their nodes (one per replica),
    waiting jobs in arrival order."""
    now: float
    cluster: Cluster
    running: dict[str, tuple[Gang, tuple[int, ...]]]
    waiting: list[Gang]


@dataclass
class Decision:
    start: dict[str, tuple[int, ...]] = field(default_factory=dict)  # job -> a node per replica
    move: dict[str, tuple[int, ...]] = field(default_factory=dict)   # running job -> its new nodes
    preempt: list[str] = field(default_factory=list)                 # running jobs sent back to wait


class Policy(Protocol):
    name: str

    def decide(self, view: View) -> Decision: ...
