"""GPU composition in the controller (docs/composition.md, "In the controller").

The plan's compositions are written by the actuator (gpu_policy.kubernetes.write.actuator,
gpu_policy.kubernetes.write.attach), fenced by the Lease like every write, against the
requests the informer cache holds; a job the plan starts on GPUs not attached yet stays gated
(`WaitingForComposition`, gpu_policy.kubernetes.write.admit). What the controller adds around
it is `RequestTracker`:

- each request a write answered goes into the cache at once (`seen`): the next round may
  come before the watch brings it, and must plan it as in flight, not ask again;
- metrics (`count`): gpu-policy's requests by the operator's state, and attaches and detaches by result.
"""

from __future__ import annotations

from gpu_policy.controller.cache import COMPOSABILITY_REQUESTS, Cache
from gpu_policy.controller.metrics import Metrics
from gpu_policy.kubernetes.names import CRO_KIND
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.model.cluster import Outcome

#: the state label of a request the operator has not picked up yet (no status.state)
NEW = "New"


class RequestTracker:
    """Keeps the controller's view of its ComposabilityRequests current, and counts them."""

    def __init__(self, cache: Cache, metrics: Metrics):
        self.cache, self.metrics = cache, metrics

    def seen(self, name: str, body: dict) -> None:
        """A write's answer: the request as it is now, or (a delete's Status) gone."""
        meta = body.get("metadata")
        if body.get("kind") == CRO_KIND and isinstance(meta, dict) and meta.get("name") == name:
            self.cache.apply(COMPOSABILITY_REQUESTS, "MODIFIED", body)
        else:
            self.cache.apply(COMPOSABILITY_REQUESTS, "DELETED", {"metadata": {"name": name}})

    def count(self, snap: Snapshot, outcomes: list[Outcome]) -> None:
        """What one round's look found and its actions did, as metrics."""
        for o in outcomes:
            if o.action in ("attach", "detach"):
                self.metrics.compositions.labels(o.action, o.result).inc()
        self.metrics.composition_requests.clear()
        for r in (snap.composed.requests.values() if snap.composed else ()):
            self.metrics.composition_requests.labels(r.state or NEW).inc()
