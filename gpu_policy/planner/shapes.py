"""Job shapes: what one replica asks of a node. Jobs of one shape are interchangeable
for placement, so the program places shapes, not jobs, and its size grows with the
number of distinct shapes rather than with jobs times nodes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpu_policy.model import Job, Node, Scenario, gpus_fit

_EPS = 1e-9


@dataclass(frozen=True)
class Shape:
    """GPUs per replica (below 1: a fraction of one GPU), CPUs, memory and GPU models."""

    gpus: float
    cpu: float = 0.0
    memory_gib: float = 0.0
    models: tuple[str, ...] | None = None
    mig_profile: str | None = None  # one MIG slice of this profile (gpus: its share of a GPU)

    @property
    def fractional(self) -> bool:
        return self.gpus < 1 or self.mig_profile is not None

    @property
    def whole_gpus(self) -> int:
        """Whole GPUs one replica takes from its node's free GPUs (a fraction takes none)."""
        return 0 if self.fractional else int(self.gpus)

    def fits_model(self, node: Node | NodeKind) -> bool:
        """The node's GPUs are of a model, and a form, the shape can use."""
        return gpus_fit(self.models, self.fractional, self.mig_profile, node)

    def fits(self, node: Node | NodeKind) -> bool:
        """Could one replica ever run on `node` (model, CPUs, memory, healthy GPUs)?"""
        if not self.fits_model(node):
            return False
        if node.cpu is not None and self.cpu > node.cpu + _EPS:
            return False
        if node.memory_gib is not None and self.memory_gib > node.memory_gib + _EPS:
            return False
        healthy = node.healthy if isinstance(node, NodeKind) else len(node.healthy_gpus)
        return healthy >= (1 if self.fractional else self.gpus)

    def representative(self, name: str = "shape") -> Job:
        """A job of this shape, for pricing a placement."""
        return Job(name=name, queue="", gpus=self.gpus, cpu=self.cpu or None, memory_gib=self.memory_gib or None,
                   gpu_model=list(self.models) if self.models is not None else None, mig_profile=self.mig_profile)


def shape_of(job: Job) -> Shape:
    models = tuple(sorted(job.gpu_model)) if job.gpu_model else None
    return Shape(job.gpus, job.cpu or 0.0, job.memory_gib or 0.0, models, job.mig_profile)


@dataclass(frozen=True)
class NodeKind:
    """What a node offers any job, whatever runs on it: nodes of one kind are alike."""

    gpu_model: str | None
    healthy: int
    cpu: float | None
    memory_gib: float | None
    shared: bool = False  # time-sliced or MPS GPUs: places for fractions only
    mig_profiles: tuple[str, ...] = ()  # MIG-partitioned GPUs: places for slices of these profiles only

    @classmethod
    def of(cls, n: Node) -> NodeKind:
        return cls(n.gpu_model, len(n.healthy_gpus), n.cpu, n.memory_gib, n.shared, n.mig_profiles)


def node_kinds(s: Scenario) -> Counter[NodeKind]:
    """How many nodes of each kind the cluster has (a few kinds, however many nodes)."""
    return Counter(NodeKind.of(n) for n in s.nodes)


@dataclass(frozen=True)
class Kind:
    """Waiting jobs the program does not tell apart: one queue, shape, gang size, priority
    and preemptibility. It decides how many of a kind start; the oldest start first."""

    queue: str
    shape: Shape
    replicas: int
    priority: int
    preemptible: bool

    @classmethod
    def of(cls, job: Job) -> Kind:
        return cls(job.queue, shape_of(job), job.replicas, job.priority, job.is_preemptible)

    @property
    def total_gpus(self) -> float:
        return self.shape.gpus * self.replicas
