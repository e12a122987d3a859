"""Settings of the Kubernetes backend: where gpu-policy's objects live, how hard it may
push the API server, and how long reservations and the lease last."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

from gpu_policy.kubernetes.names import DEFAULT_NAMESPACE
from gpu_policy.model.checkpointing import CHECKPOINT_DEADLINE_S

#: a cluster-scoped object's name: a DNS subdomain (at most 253 characters)
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass
class KubernetesSettings:
    namespace: str = DEFAULT_NAMESPACE
    """Namespace of gpu-policy's own ConfigMaps and Lease."""
    gpu_resource: str = "nvidia.com/gpu"
    """The extended resource that counts whole GPUs on nodes and in pod requests."""
    queues: str = "auto"
    """Where queues come from: ``configmap`` (gpu-policy-queues), ``kai`` (KAI-Scheduler Queue
    objects) or ``auto`` (the ConfigMap when it exists, else KAI's queues)."""
    topology: str | None = None
    """The Kueue Topology whose levels gpu-policy places by, when the queues ConfigMap has no
    ``topology.yaml`` (None: the only one, else the one the pods name in ``kai.scheduler/topology``)."""
    page_size: int = 500
    """Objects per LIST page. 500 is what kubectl uses: small pages keep each answer cheap
    for the API server, and 4,200 pods still take only 9 pages."""
    timeout_s: float = 30.0
    """Seconds one attempt of a request may take in all, from connecting to the last byte of
    its answer (a total, not per read: a server that drips one byte a second is cut off).
    Also never longer than what is left of `deadline_s`."""
    deadline_s: float = 60.0
    """Seconds within which 429, 5xx and unreachable answers are retried before giving up;
    no request, retries included, runs past it."""
    backoff_s: float = 0.5
    """First wait before a retry when the answer has no Retry-After; doubles each time."""
    backoff_jitter: float = 0.2
    """Each own backoff wait is multiplied by a random factor in [1 - jitter, 1 + jitter], so
    many planners refused at once do not all come back at the same instant (0: no jitter)."""
    retry_floor_s: float = 0.5
    """The shortest wait between two attempts, whatever the answer says: `Retry-After: 0`
    must not turn into hundreds of requests a second."""
    retry_ceiling_s: float = 30.0
    """The longest wait a `Retry-After` may ask for; longer (or absurd) values are clamped,
    and a value that is not a number of seconds (nan, -1, a date) falls back to backoff."""
    max_response_bytes: int = 64 * 1024 * 1024
    """Bytes one answer may hold once decompressed (a gzip bomb stops here). A LIST page of
    500 pods is a few MB; 64 MiB leaves room for very large objects yet bounds memory."""
    max_pages: int = 400
    """Pages one LIST may take: 200,000 objects at 500 a page, above Kubernetes' own limit of
    150,000 pods per cluster. A server that hands out a new continue token forever is cut off;
    a token must also differ from every earlier one."""
    max_empty_pages: int = 10
    """Pages in a row one LIST may answer with no item and yet a continue token. A real API
    server fills each page up to `page_size` (a field selector included) unless the list
    ends; a run of empty pages is a server that makes no progress, cut off after a few
    requests rather than after `max_pages`."""
    list_deadline_s: float = 300.0
    """Seconds one LIST may take in all, every page and retry included (each page's request
    also keeps to `timeout_s` and `deadline_s`). 150,000 pods are 300 pages of 500, a few
    tenths of a second each; a server that trickles out pages is cut off here."""
    max_requests_per_round: int = 2000
    """Requests one round (an observation and the acting on its plan) may send, retries
    included: an observation takes about ten, acting one per pod evicted and per write. It
    bounds what a server that makes a round loop (answers that never settle, retries without
    end) can cost; a burst of releases is not that: the controller releases what the budget
    holds (a patch and an Event per pod) and carries the rest over to the next round, at once."""
    max_requests_in_flight: int = 20
    """Writes (releases, Events) one round has out at once. 20 keeps within the concurrency
    client-go lets a controller have (controller-runtime's client: QPS 20, burst 30;
    kube-scheduler, which binds the pods this releases: QPS 50, burst 100), and against an API
    server that takes 50 ms to answer still sends 400 a second (one at a time: 20), 200 pods
    released a second at a patch and an Event each."""
    reservation_lifetime_s: float = 600.0
    """Seconds a step's reservation holds its GPUs when its pods never show up bound."""
    lease_duration_s: float = 30.0
    """Seconds the planning lease is valid without renewal; a planner that dies is replaced
    after this. Renewed every third of it while the planner works."""
    lease_wait_s: float = 300.0
    """Seconds to wait for another planner to release the lease before giving up."""
    lease_poll_s: float = 1.0
    """Seconds between looks at a lease another planner holds."""
    max_foreign_lease_s: float = 120.0
    """Seconds a Lease another holder wrote is honoured without changing, whatever its
    renewTime or leaseDurationSeconds say (a renewTime in the future or a duration of years
    would stop every planner); longer durations are clamped to it. A live holder renews
    every third of its duration, so 120 s is four times the default lease."""
    eviction_deadline_s: float = 60.0
    """Seconds within which an eviction that a PodDisruptionBudget refuses (429) is retried;
    after that it is reported as blocked, never forced."""
    checkpoint_deadline_s: float = CHECKPOINT_DEADLINE_S
    """Seconds at most between asking a victim to checkpoint and evicting it without its answer
    (else `max(60, 2 x its save time)`), and the longest grace period an eviction gives for a save
    (`save_s + 30`; a pod's own longer one is kept). Ten minutes: a large model's save takes
    minutes, and the job waiting for the GPUs should not wait much longer than that."""

    composition_deadline_s: float = 300.0
    """Seconds a ComposabilityRequest has, after gpu-policy changed its size, to be complete
    (Running, every device Online); after that its errors are reported and its size rolled
    back. Attaching a GPU takes the CDI operator seconds to minutes (it looks again every 30 s);
    a webhook that is down is retried within the same time."""
    composition_settle_s: float = 120.0
    """Seconds at most that a composable node is not composed after gpu-policy's devices
    Online on it changed while its allocatable GPUs did not (the device plugin re-registers
    after the CDI operator attaches or detaches: a restart of its pod and the kubelet's next
    node status, tens of seconds); it ends earlier once the allocatable GPUs change. 120 s
    also covers DCGM's staleness (120 s), during which a detached GPU still reads idle."""

    def validate(self) -> KubernetesSettings:
        """Raise ValueError naming the first bad setting; return self."""
        if self.queues not in ("auto", "configmap", "kai"):
            raise ValueError(f"queues: must be auto, configmap or kai, got {self.queues!r}")
        if not self.namespace or not self.gpu_resource:
            raise ValueError("namespace and gpu_resource: must be non-empty")
        if self.topology is not None and not (len(self.topology) <= 253 and _OBJECT_NAME.fullmatch(self.topology)):
            raise ValueError(f"topology: must be a Kubernetes object name (lower-case letters, digits, '-' and '.'), "
                             f"got {self.topology!r}")
        for name in ("page_size", "max_response_bytes", "max_pages", "max_empty_pages",
                     "max_requests_per_round", "max_requests_in_flight"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: must be a whole number >= 1, got {value!r}")
        if not isinstance(self.backoff_jitter, (int, float)) or not 0 <= self.backoff_jitter < 1:
            raise ValueError(f"backoff_jitter: must be in [0, 1), got {self.backoff_jitter!r}")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_s") and (not isinstance(value, (int, float)) or not 0 < value < math.inf):
                raise ValueError(f"{f.name}: must be > 0 seconds, got {value!r}")
        if self.lease_duration_s > self.max_foreign_lease_s:  # another replica would take it over early
            raise ValueError(f"lease_duration_s: must be at most max_foreign_lease_s ({self.max_foreign_lease_s:g} s, "
                             f"the longest Lease another planner honours), got {self.lease_duration_s!r}")
        return self
