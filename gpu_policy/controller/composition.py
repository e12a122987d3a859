"""GPU composition in the controller (docs/composition.md, "In the controller").

The plan's compositions are written by the one-shot actuator (KubernetesCluster.carry_out,
gpu_policy.kubernetes.write.attach), fenced by the Lease like every write, against the requests
the informer cache holds. What the controller adds around it:

- each request a write answered goes into the cache at once (`seen`): the next round may
  come before the watch brings it, and must plan it as in flight, not ask again;
- a job the plan starts on GPUs that are not attached yet stays gated (`hold`, reason
  `WaitingForComposition`) until their requests are complete: released earlier, its pods
  would sit unbound on a node whose device plugin does not offer the GPUs yet;
- metrics: gpu-policy's requests by the operator's state, and attaches and detaches by result.
"""

from __future__ import annotations

from gpu_policy.model.cluster import Outcome
from gpu_policy.controller.cache import COMPOSABILITY_REQUESTS, Cache
from gpu_policy.controller.metrics import Metrics
from gpu_policy.kubernetes.names import CRO_KIND
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.model.plan import JobDecision
from gpu_policy.planner.core.codes import Reason

#: the state label of a request the operator has not picked up yet (no status.state)
NEW = "New"


class Composition:
    def __init__(self, cache: Cache, metrics: Metrics):
        self.cache, self.metrics = cache, metrics
        self._snap: Snapshot | None = None
        self._failed: list[Outcome] = []

    def seen(self, name: str, body: dict) -> None:
        """A write's answer: the request as it is now, or (a delete's Status) gone."""
        meta = body.get("metadata")
        if body.get("kind") == CRO_KIND and isinstance(meta, dict) and meta.get("name") == name:
            self.cache.apply(COMPOSABILITY_REQUESTS, "MODIFIED", body)
        else:
            self.cache.apply(COMPOSABILITY_REQUESTS, "DELETED", {"metadata": {"name": name}})

    def took(self, snap: Snapshot, outcomes: list[Outcome]) -> None:
        """What one round's look found and its execution did: kept for `hold`, and counted."""
        self._snap = snap
        self._failed = [o for o in outcomes if o.action == "attach" and o.result == "failed"]
        for o in outcomes:
            if o.action in ("attach", "detach"):
                self.metrics.compositions.labels(o.action, o.result).inc()
        self.metrics.composition_requests.clear()
        for r in (snap.composed.requests.values() if snap.composed else ()):
            self.metrics.composition_requests.labels(r.state or NEW).inc()

    def hold(self, decision: JobDecision) -> Reason | None:
        """Why a job the plan starts stays gated: it runs on GPUs being attached (asked for in
        this round or before); None when its GPUs are all there."""
        snap = self._snap
        if snap is None or snap.composed is None:
            return None
        nodes = snap.composed.waits_on(decision, snap.scenario.nodes)
        if not nodes:
            return None
        failed = [o.detail for o in self._failed if o.job in nodes]
        waiting = [r.waiting() for (node, _), r in sorted(snap.composed.requests.items())
                   if node in nodes and not r.complete]
        return Reason("WaitingForComposition", "; ".join(failed or waiting) or decision.reason)
