"""The cluster snapshot the planner reads: nodes, queues (teams) and jobs.

Plain dataclasses that store what they are given; `gpu_policy.model.scenario_file` checks
them at the edge, so the planner can trust every field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The apiVersion of the files gpu-policy reads and writes: scenarios and plans.
API_VERSION = "gpu-policy/v1alpha1"

#: Jobs at or above this priority are non-preemptible unless they say otherwise.
NON_PREEMPTIBLE_PRIORITY = 100

#: The one tolerance for comparing amounts (GPUs, CPUs, GiB) that are sums of fractions,
#: in the model and in every rule of the planner. Amounts are
#: multiples of 1/1000 at finest (fractions below are refused), so any slack well below
#: that and well above float error decides the same.
EPS = 1e-6

#: The queue of GPUs held by pods shutting down (evicted, deleted): a snapshot of a live
#: cluster puts them there; they come back when the pods exit (docs/kubernetes.md)
TERMINATING_QUEUE = "gpu-policy.io/terminating"


@dataclass(frozen=True)
class GpuSharing:
    """A node whose GPUs are shared by time-slicing or MPS (NVIDIA's device plugin): each
    physical GPU is offered as `replicas` places, each a place for fractional work only."""

    strategy: str  # "time-slicing" or "mps"
    replicas: int


@dataclass
class Node:
    name: str
    gpus: int  # physical GPUs, however they are shared
    gpu_model: str | None = None
    cpu: float | None = None
    memory_gib: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    unhealthy_gpus: list[int] = field(default_factory=list)
    taints: list[dict] = field(default_factory=list)  # {key, value, effect} (gpu_policy.model.placement)
    gpu_sharing: GpuSharing | None = None
    mig: dict[str, int] = field(default_factory=dict)  # MIG profile -> slices: its GPUs are partitioned

    @property
    def shared(self) -> bool:
        """Its GPUs are time-sliced or shared by MPS: places for fractional work only."""
        return self.gpu_sharing is not None

    @property
    def mig_profiles(self) -> tuple[str, ...]:
        """The MIG profiles it has slices of (none: its GPUs are not partitioned)."""
        return tuple(sorted(self.mig))

    @property
    def healthy_gpus(self) -> list[int]:
        if not self.unhealthy_gpus:
            return list(range(self.gpus))
        bad = set(self.unhealthy_gpus)
        return [i for i in range(self.gpus) if i not in bad]


@dataclass(frozen=True)
class ModelQuota:
    """What a queue may hold of one GPU model (`Queue.models`)."""

    limit: float | None = None  # the most GPUs of the model it holds (None: no limit)


@dataclass
class Queue:
    name: str
    parent: str | None = None
    deserved: float = 0
    limit: float | None = None
    over_quota_weight: float = 1
    priority: int = 0
    namespaces: list[str] | None = None  # who may use it (gpu_policy.model.placement.may_use); None: anyone
    namespace_selector: dict | None = None  # {matchLabels: {...}} on the namespace's labels
    models: dict[str, ModelQuota] = field(default_factory=dict)  # GPU model -> its quota (rules.model_limits)
    min_runtime_s: float = 0  # its jobs are no victims before they have run this long (rules.protection)
    preemption_delay_s: float = 0  # its waiting jobs make nobody a victim before they have waited this long
    usage_gpu_h: float = 0  # decayed past usage, GPU-hours (counted where the policy's usage_half_life_s is set)


@dataclass(frozen=True)
class TopologyLevel:
    """One level of the network hierarchy (the scenario's `topology:`, widest first): the
    nodes that share the value of `label`, and of every wider level's label, are one domain
    of it (docs/topology.md)."""

    name: str
    label: str


@dataclass(frozen=True)
class JobTopology:
    """Where a job's replicas go in the hierarchy (level names of the scenario's `topology:`)."""

    required: str | None = None  # all replicas on nodes of one domain of this level
    preferred: str | None = None  # as few domains of this level, then of each narrower one, as can hold them


@dataclass
class Job:
    name: str
    queue: str
    gpus: float
    replicas: int = 1
    priority: int = 50
    preemptible: bool | None = None
    gpu_model: list[str] | None = None
    cpu: float | None = None
    memory_gib: float | None = None
    running: list[str] = field(default_factory=list)
    gpu_indices: list[list[int]] | None = None
    submitted_at: float = 0
    checkpoint_age_s: float | None = None
    namespace: str | None = None  # None: the part of `name` before a `/`, if any
    node_selector: dict[str, str] = field(default_factory=dict)
    node_affinity: list[dict] | None = None  # required terms, ORed (gpu_policy.model.placement)
    tolerations: list[dict] = field(default_factory=list)
    mig_profile: str | None = None  # one MIG slice of this profile per replica; `gpus` is its share of a GPU
    checkpoint_every_s: float | None = None  # its periodic checkpoint interval (next due: every - age)
    save_s: float | None = None  # seconds it needs to save a checkpoint
    saves_on_request: bool = False  # it checkpoints when asked, before it is stopped
    running_for_s: float | None = None  # seconds since it (last) started (None: unknown)
    waiting_for_s: float | None = None  # seconds it has waited (None: unknown)
    topology: JobTopology | None = None  # required and preferred levels (rules.topology)

    @property
    def is_running(self) -> bool:
        return bool(self.running)

    @property
    def is_fractional(self) -> bool:
        """A part of one GPU: a fraction, or a MIG slice (a 7g slice is a whole GPU's worth)."""
        return self.gpus < 1 or self.mig_profile is not None

    @property
    def is_preemptible(self) -> bool:
        if self.preemptible is not None:
            return self.preemptible
        return self.priority < NON_PREEMPTIBLE_PRIORITY

    @property
    def total_gpus(self) -> float:
        """GPUs the whole gang holds when it runs."""
        return self.gpus * self.replicas

    def fits_model(self, node: Node) -> bool:
        """The node's GPUs are of a model, and a form, this job can use (`gpus_fit`)."""
        return gpus_fit(self.gpu_model, self.is_fractional, self.mig_profile, node)


def gpus_fit(models, fractional: bool, mig_profile: str | None, node) -> bool:
    """Whether a replica asking for `models` (None: any), a fraction or whole GPUs, or a MIG
    slice of `mig_profile`, can use the GPUs of `node` (a Node or a node kind): its model; a
    node with MIG slices only for MIG jobs of its profiles; shared GPUs only for fractions
    (the device plugin offers a time-sliced or MPS GPU as replicas, never whole)."""
    if models and node.gpu_model not in models:
        return False
    if mig_profile is not None or node.mig_profiles:
        return mig_profile in node.mig_profiles
    return fractional or not node.shared


@dataclass
class ComposablePool:
    """GPUs of one model that sit in the composable pool, attached to no node."""

    model: str
    free: int


@dataclass
class ComposableNode:
    """A node that composition may give more GPUs, up to `max_gpus`. Its `attached` GPUs
    are the ones composition attached (and may detach): its highest GPU indices, counted
    in the node's `gpus`."""

    name: str
    max_gpus: int
    attached: int = 0


@dataclass
class Composable:
    """The scenario's optional `composable:` section (docs/composition.md)."""

    pools: list[ComposablePool] = field(default_factory=list)
    nodes: list[ComposableNode] = field(default_factory=list)
    attach_seconds: float = 120
    """Expected seconds from asking for a GPU to its being usable (for reasons and the demo)."""
    idle_detach_s: float = 1800
    """Attached GPUs idle this long, with no waiting job that could use them, go back to the pool."""
    before_preemption: bool = True
    """Attach before reclaiming by preemption (False: reclaim first, attach for what is left)."""

    def node(self, name: str) -> ComposableNode | None:
        """The composable node called `name` (a scan: index `nodes` to look up many)."""
        return next((n for n in self.nodes if n.name == name), None)

    def pool(self, model: str | None) -> ComposablePool | None:
        return next((p for p in self.pools if p.model == model), None)


@dataclass
class Namespace:
    """A namespace's labels, for queues that choose their users by label."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    """Cluster-wide settings of the policy (the scenario's `policy:` section)."""

    reclaim_wait_s: float = 0  # a preemption may wait this long for a victim's due checkpoint
    usage_half_life_s: float | None = None  # fair share over time: past usage (queues' usage_gpu_h) counts
    usage_weight: float = 1.0  # how strongly past usage lowers a queue's part of the surplus

    @property
    def counts_usage(self) -> bool:
        """Whether queues' past usage changes their fair shares (docs/policy.md, "Fair share over time")."""
        return self.usage_half_life_s is not None and self.usage_weight > 0


@dataclass
class Scenario:
    nodes: list[Node]
    queues: list[Queue]
    jobs: list[Job]
    expect: dict | None = None
    source: str = ""
    telemetry: dict | None = None  # simulated DCGM profiles (docs/telemetry.md)
    composable: Composable | None = None  # GPUs that can be attached to nodes (docs/composition.md)
    namespaces: list[Namespace] = field(default_factory=list)  # labels for queues' namespace selectors
    policy: Policy = field(default_factory=Policy)  # cluster-wide settings of the policy
    topology: list[TopologyLevel] = field(default_factory=list)  # the network hierarchy, widest level first

    def node(self, name: str) -> Node:
        return self._nodes_by_name()[name]

    def queue(self, name: str) -> Queue:
        return {q.name: q for q in self.queues}[name]

    def _nodes_by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @property
    def gpus_total(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpus_schedulable(self) -> int:
        """GPUs that may receive work: all but the unhealthy ones."""
        return sum(len(n.healthy_gpus) for n in self.nodes)

    def children(self, queue: str | None) -> list[Queue]:
        """Queues whose parent is `queue` (None: the top level)."""
        return [q for q in self.queues if q.parent == queue]

    def leaf_queue_names(self, queue: str) -> list[str]:
        """`queue` itself when it has no children, else every leaf below it."""
        kids = self.children(queue)
        if not kids:
            return [queue]
        return [leaf for kid in kids for leaf in self.leaf_queue_names(kid.name)]
