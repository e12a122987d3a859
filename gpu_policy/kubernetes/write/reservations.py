"""Writing reservations (read: `gpu_policy.kubernetes.read.reservations`, which says what they are)."""

from __future__ import annotations

from gpu_policy.kubernetes.names import RESERVATIONS_CONFIGMAP
from gpu_policy.kubernetes.read.reservations import Reservation
from gpu_policy.kubernetes.write.config_map import update_config_map
from gpu_policy.model import Job
from gpu_policy.model.plan import JobDecision


def reservation_for(job: Job, decision: JobDecision, expires_at: float) -> Reservation:
    """The reservation that holds `job` where `decision` places it, until `expires_at`."""
    namespace, _, name = job.name.partition("/")
    return Reservation(namespace, name, job.queue, job.gpus, job.replicas, [r.node for r in decision.replicas],
                       [list(r.gpu_indices) for r in decision.replicas], expires_at, job.priority)


def write_reservations(client, add: list[Reservation], stale: set[str], check, read=None) -> dict | None:
    """Add `add` and drop the `stale` keys (expired, or whose pods are bound) in one
    optimistic write of the ConfigMap, read again on a conflict. `check` runs before each
    write (it raises when the planning lease was lost), `read` reads it first (`update_config_map`).
    Returns the ConfigMap as it now is (None: it does not exist and nothing was to be written)."""
    def change(data: dict[str, str]) -> dict[str, str]:
        new = {key: value for key, value in data.items() if key not in stale}
        new.update({r.key: r.value() for r in add})
        return new

    return update_config_map(client, RESERVATIONS_CONFIGMAP, change, check, "the reservation", read)
