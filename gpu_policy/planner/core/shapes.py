"""Job shapes: what one replica asks of a node. Jobs of one shape are interchangeable
for placement, so the program places shapes, not jobs, and its size grows with the
number of distinct shapes rather than with jobs times nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from gpu_policy.model import EPS, Job, Node, Scenario, gpus_fit
from gpu_policy.model.placement import Constraints, admits, constraints_of


@dataclass(frozen=True)
class Shape:
    """GPUs per replica (below 1: a fraction of one GPU), CPUs, memory, GPU models and
    placement constraints (node selector, affinity, tolerations; None: none)."""

    gpus: float
    cpu: float = 0.0
    memory_gib: float = 0.0
    models: tuple[str, ...] | None = None
    constraints: Constraints | None = None
    mig_profile: str | None = None  # one MIG slice of this profile (gpus: its share of a GPU)
    apart: Hashable = None  # what a rule tells apart (`Rule.apart`): jobs alike in all else but this are
    # placed as shapes of their own, so that the rule's rows can count them (a queue's per-model limit)

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

    def admitted(self, node: Node | NodeKind) -> bool:
        """Do the placement constraints let a replica on `node` (gpu_policy.model.placement.admits)?"""
        if isinstance(node, NodeKind):
            return node.admits is None or self.constraints in node.admits
        return admits(node, self.constraints)

    def fits(self, node: Node | NodeKind) -> bool:
        """Could one replica ever run on `node` (model, placement constraints, CPUs, memory,
        healthy GPUs)? The one test of "a replica fits a node" that every part of the planner uses."""
        if not self.fits_model(node) or not self.admitted(node):
            return False
        if node.cpu is not None and self.cpu > node.cpu + EPS:
            return False
        if node.memory_gib is not None and self.memory_gib > node.memory_gib + EPS:
            return False
        healthy = node.healthy if isinstance(node, NodeKind) else len(node.healthy_gpus)
        return healthy >= (1 if self.fractional else self.gpus)

    def representative(self, name: str = "shape") -> Job:
        """A job of this shape, for pricing a placement."""
        return Job(name=name, queue="", gpus=self.gpus, cpu=self.cpu or None, memory_gib=self.memory_gib or None,
                   gpu_model=list(self.models) if self.models is not None else None, mig_profile=self.mig_profile)


#: What tells a job's replicas apart from others alike (`Rule.apart`, asked of every rule; None: nothing).
Apart = Callable[[Job], Hashable] | None


def shape_of(job: Job, apart: Apart = None) -> Shape:
    """The shape of one replica of `job`; `apart`: the plan's rules' marks (None: none)."""
    models = tuple(sorted(job.gpu_model)) if job.gpu_model else None
    return Shape(job.gpus, job.cpu or 0.0, job.memory_gib or 0.0, models, constraints_of(job), job.mig_profile,
                 apart(job) if apart is not None else None)


@dataclass(frozen=True)
class NodeKind:
    """What a node offers any job, whatever runs on it: nodes of one kind are alike.
    `admits`: the placement constraints of the scenario's jobs it lets in (None: the
    scenario has no constraint and no taint, so it lets every job in)."""

    gpu_model: str | None
    healthy: int
    cpu: float | None
    memory_gib: float | None
    admits: frozenset | None = None
    shared: bool = False  # time-sliced or MPS GPUs: places for fractions only
    mig_profiles: tuple[str, ...] = ()  # MIG-partitioned GPUs: places for slices of these profiles only


def node_kinds(s: Scenario, constraints: frozenset | None) -> Counter[NodeKind]:
    """How many nodes of each kind the cluster has (a few kinds, however many nodes).
    `constraints`: the scenario's (`scenario_constraints`, a pass over every job, which the
    caller makes once), judged here once per (distinct constraints, node)."""
    if constraints is not None:  # each node's labels and taints decide what it admits
        return Counter(node_kind(n, constraints) for n in s.nodes)
    alike: dict[tuple, list] = {}  # nodes that offer the same GPUs -> [the first of them, how many]
    for n in s.nodes:
        key = (n.gpu_model, n.gpus, tuple(n.unhealthy_gpus), n.cpu, n.memory_gib, n.gpu_sharing, tuple(n.mig))
        if key in alike:
            alike[key][1] += 1
        else:
            alike[key] = [n, 1]
    kinds: Counter[NodeKind] = Counter()
    for n, count in alike.values():
        kinds[node_kind(n, None)] += count
    return kinds


def node_kind(n: Node, constraints: frozenset | None) -> NodeKind:
    """`constraints`: those of the scenario's jobs (`scenario_constraints`), None when nothing constrains."""
    admitted = None if constraints is None else frozenset(c for c in constraints if admits(n, c))
    return NodeKind(n.gpu_model, len(n.healthy_gpus), n.cpu, n.memory_gib, admitted, n.shared, n.mig_profiles)


def scenario_constraints(s: Scenario) -> frozenset | None:
    """The distinct constraints of the scenario's jobs (None among them for jobs without),
    or None when no job has any and no node has a taint."""
    found = {constraints_of(j) for j in s.jobs}
    if found == {None} and not any(n.taints for n in s.nodes):
        return None
    return frozenset(found | {None})


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
    def of(cls, job: Job, apart: Apart = None) -> Kind:
        return cls(job.queue, shape_of(job, apart), job.replicas, job.priority, job.is_preemptible)

    @property
    def total_gpus(self) -> float:
        return self.shape.gpus * self.replicas


class Eligible:
    """Per distinct placement constraints, the names of the nodes that admit them, computed
    once per plan (None: every node, the case of a job without constraints on a cluster
    without taints, which costs nothing)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.untainted = not any(n.taints for n in nodes)
        self.cache: dict[Constraints | None, frozenset[str]] = {}

    def names(self, c: Constraints | None) -> frozenset[str] | None:
        if c is None and self.untainted:
            return None
        if c not in self.cache:
            self.cache[c] = frozenset(n.name for n in self.nodes if admits(n, c))
        return self.cache[c]

    def allows(self, shape: Shape, node: str) -> bool:
        names = self.names(shape.constraints)
        return names is None or node in names

