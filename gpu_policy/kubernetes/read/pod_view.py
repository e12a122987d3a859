"""What gpu-policy reads of one pod (`PodView`) and how it names one (`PodRef`): the type the
readers of pods, workloads, devices and DRA share, below all of them (`pods.read_pod` makes it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_policy.model import JobTopology


@dataclass(frozen=True)
class PodRef:
    """A pod as the actuator names it: the uid tells a pod from its replacement."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def names(self, pod: dict | None) -> bool:
        """Whether `pod` (an object read, or a write's answer) is this pod, not one gone or made
        since under its name."""
        return pod is not None and (pod.get("metadata") or {}).get("uid") == self.uid


@dataclass(frozen=True)
class TopologyAsk:
    """What a pod's annotations ask of the network hierarchy, as written: the (annotation, value)
    that gives its required and its preferred level (each from the first annotation set that
    has it), and the Topology object it names (`kai.scheduler/topology`)."""

    required: tuple[str, str] | None = None
    preferred: tuple[str, str] | None = None
    named: str | None = None


@dataclass
class PodView:
    namespace: str
    name: str
    uid: str
    node: str | None  # the node whose GPUs it holds: spec.nodeName, or the hostname it was released to
    gpus: float  # whole GPUs, or a fraction of one; 0 for a pod that asks for none
    cpu: float | None  # None: no container asks for it
    memory_gib: float | None
    priority: int
    created: float  # metadata.creationTimestamp, seconds since the epoch
    deleting: bool  # metadata.deletionTimestamp is set
    queue_label: str | None  # gpu-policy.io/queue, else kai.scheduler/queue
    group: str  # the job it belongs to: a gang's name (workloads.py), else its own name
    preemptible: bool | None
    gpu_model: list[str] | None
    gpu_indices: list[int] | None
    checkpoint_at: float | None  # gpu-policy.io/last-checkpoint, seconds since the epoch
    unreadable: str | None = None  # why gpu-policy cannot plan this GPU pod
    marked: bool = False  # carries gpu-policy.io/preempted: a plan chose it as a victim
    constraints: dict = field(default_factory=dict)  # node_selector, node_affinity, tolerations (scenario form)
    shared_devices: int = 0  # replicas of shared GPUs asked for as `<gpu resource>.shared` (devices.py)
    gated: bool = False  # held by gpu-policy's scheduling gate: a waiting replica gpu-policy releases
    bound: bool = False  # spec.nodeName is set (else `node` is a released pod's hostname selector)
    gang: bool = False  # its group is a gang: all its pods start together or none does
    replicas: int | None = None  # the gang's minimum size, when its workload says it
    mig_request: tuple[str, int] | None = None  # (MIG profile, slices) asked for as `<vendor>/mig-<profile>`
    mig_profile: str | None = None  # the MIG slice it holds or asks for, once read against the nodes (devices.py)
    claims: tuple[tuple[str | None, str | None], ...] = ()  # DRA: (ResourceClaim, else its template) per claim
    pod_group: tuple[str, str] | None = None  # its PodGroup (API group, name): minMember decides if it is a gang
    train_job: str | None = None  # its JobSet's name: a TrainJob of that name gives the gang's size
    # what "preemption that loses no work" reads (gpu_policy.kubernetes.read.progress, write.checkpoint_first)
    started: float | None = None  # status.startTime, seconds since the epoch
    grace_s: int | None = None  # spec.terminationGracePeriodSeconds (None: the API server's default, 30)
    checkpoint_every_s: float | None = None  # gpu-policy.io/checkpoint-every-s
    save_s: float | None = None  # gpu-policy.io/checkpoint-save-s: how long its last save took
    saves_on_request: bool = False  # gpu-policy.io/saves-on-request: "true"
    checkpoint_requested: float | None = None  # gpu-policy.io/checkpoint-requested: when gpu-policy asked
    checkpoint_awaited: float | None = None  # gpu-policy.io/checkpoint-awaited: the plan that waits for its checkpoint
    evict_by: float | None = None  # gpu-policy.io/evict-by: when a victim awaited at its checkpoint goes at the latest
    # where its job goes in the network hierarchy (gpu_policy.kubernetes.read.topology)
    topology_ask: TopologyAsk | None = None  # as its annotations say it (None: they say nothing of topology)
    topology: JobTopology | None = None  # the levels it asks for, by name, once read against the cluster's levels

    @property
    def full_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> PodRef:
        return PodRef(self.namespace, self.name, self.uid)

    @property
    def asks_for_gpus(self) -> bool:
        return self.gpus > 0 or self.shared_devices > 0 or self.mig_request is not None or self.unreadable is not None
