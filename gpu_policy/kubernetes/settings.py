"""Settings of the Kubernetes backend: where gpu-policy's objects live, how hard it may
push the API server, and how long reservations and the lease last."""

from __future__ import annotations

from dataclasses import dataclass, fields

from gpu_policy.kubernetes.names import DEFAULT_NAMESPACE


@dataclass
class KubernetesSettings:
    namespace: str = DEFAULT_NAMESPACE
    """Namespace of gpu-policy's own ConfigMaps and Lease."""
    gpu_resource: str = "nvidia.com/gpu"
    """The extended resource that counts whole GPUs on nodes and in pod requests."""
    queues: str = "auto"
    """Where queues come from: ``configmap`` (gpu-policy-queues), ``kai`` (KAI-Scheduler Queue
    objects) or ``auto`` (the ConfigMap when it exists, else KAI's queues)."""
    page_size: int = 500
    """Objects per LIST page. 500 is what kubectl uses: small pages keep each answer cheap
    for the API server, and 4,200 pods still take only 9 pages."""
    timeout_s: float = 30.0
    """Seconds one request may take (connect and read)."""
    deadline_s: float = 60.0
    """Seconds within which 429, 5xx and unreachable answers are retried before giving up."""
    backoff_s: float = 0.5
    """First wait before a retry when the answer has no Retry-After; doubles each time."""
    reservation_lifetime_s: float = 600.0
    """Seconds a step's reservation holds its GPUs when its pods never show up bound."""
    lease_duration_s: float = 30.0
    """Seconds the planning lease is valid without renewal; a planner that dies is replaced
    after this. Renewed every third of it while the planner works."""
    lease_wait_s: float = 300.0
    """Seconds to wait for another planner to release the lease before giving up."""
    lease_poll_s: float = 1.0
    """Seconds between looks at a lease another planner holds."""
    eviction_deadline_s: float = 60.0
    """Seconds within which an eviction that a PodDisruptionBudget refuses (429) is retried;
    after that it is reported as blocked, never forced."""

    composition_deadline_s: float = 300.0
    """Seconds a ComposabilityRequest has, after gpu-policy changed its size, to be complete
    (Running, every device Online); after that its errors are reported and its size rolled
    back. Attaching a GPU takes the CDI operator seconds to minutes (it looks again every 30 s);
    a webhook that is down is retried within the same time."""

    def validate(self) -> KubernetesSettings:
        """Raise ValueError naming the first bad setting; return self."""
        if self.queues not in ("auto", "configmap", "kai"):
            raise ValueError(f"queues: must be auto, configmap or kai, got {self.queues!r}")
        if not self.namespace or not self.gpu_resource:
            raise ValueError("namespace and gpu_resource: must be non-empty")
        if not isinstance(self.page_size, int) or self.page_size < 1:
            raise ValueError(f"page_size: must be a whole number >= 1, got {self.page_size!r}")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_s") and (not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"{f.name}: must be > 0 seconds, got {value!r}")
        return self
