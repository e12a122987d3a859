"""Reservations: GPUs promised to a step whose pods do not exist yet.

The ConfigMap `gpu-policy-reservations` in gpu-policy's namespace holds one key per
reserved job, ``<namespace>.<job>`` (a key cannot hold ``/``, a namespace holds no
``.``, so the key splits at its first dot), whose value is a JSON object
``{queue, gpus, replicas, nodes, gpu_indices, expires_at}`` (plus ``priority``).
Every observation counts unexpired reservations as running jobs and drops those whose
pods are all bound; only writes under the planning lease remove them from the ConfigMap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from gpu_policy.errors import ClusterBusy, ClusterObjectError, InputError
from gpu_policy.kubernetes.names import RESERVATIONS_CONFIGMAP
from gpu_policy.safe_load import parse_json


@dataclass
class Reservation:
    namespace: str
    job: str  # the job's name inside its namespace
    queue: str
    gpus: float  # per replica
    replicas: int
    nodes: list[str]  # one per replica
    gpu_indices: list[list[int]] | None
    expires_at: float  # seconds since the epoch
    priority: int = 50

    @property
    def key(self) -> str:
        return f"{self.namespace}.{self.job}"

    @property
    def job_name(self) -> str:
        return f"{self.namespace}/{self.job}"

    def value(self) -> str:
        return json.dumps({"queue": self.queue, "gpus": self.gpus, "replicas": self.replicas, "nodes": self.nodes,
                           "gpu_indices": self.gpu_indices, "priority": self.priority,
                           "expires_at": datetime.fromtimestamp(self.expires_at, timezone.utc)
                           .strftime("%Y-%m-%dT%H:%M:%SZ")}, separators=(",", ":"))


def key_of(job_name: str) -> str:
    """The ConfigMap key of the job ``NAMESPACE/NAME``."""
    return job_name.replace("/", ".", 1)


def read_reservations(config_map: dict | None) -> list[Reservation]:
    """Every reservation the ConfigMap holds (none when it does not exist)."""
    if config_map is None:
        return []
    where = f"ConfigMap {(config_map.get('metadata') or {}).get('namespace')}/{RESERVATIONS_CONFIGMAP}"
    return [_parse(key, text, where) for key, text in sorted((config_map.get("data") or {}).items())]


def _parse(key: str, text: str, where: str) -> Reservation:
    namespace, dot, job = key.partition(".")
    if not dot or not namespace or not job:
        raise ClusterObjectError(where, f"data.{key}", "the key must be <namespace>.<job>")
    try:
        value = parse_json(text, f"{where}: data.{key}")  # bounded: size, depth, finite numbers
    except (InputError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise ClusterObjectError(where, f"data.{key}", "must be a JSON object {queue, gpus, replicas, nodes, "
                                                       "gpu_indices, expires_at}")

    def need(name: str, check, problem: str):
        if name not in value or not check(value[name]):
            raise ClusterObjectError(where, f"data.{key}.{name}", f"{problem}, got {json.dumps(value.get(name))}")
        return value[name]

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    replicas = need("replicas", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "must be >= 1")
    nodes = need("nodes", lambda v: isinstance(v, list) and len(v) == replicas and all(isinstance(n, str) for n in v),
                 "must list one node per replica")
    indices = value.get("gpu_indices")
    if indices is not None and not (isinstance(indices, list) and len(indices) == replicas and all(
            isinstance(ix, list) and all(isinstance(i, int) and i >= 0 for i in ix) for ix in indices)):
        raise ClusterObjectError(where, f"data.{key}.gpu_indices", "must list GPU indices per replica, "
                                                                     f"got {json.dumps(indices)}")
    expires = need("expires_at", lambda v: isinstance(v, str) and _moment(v) is not None,
                   "must be an RFC 3339 time in UTC")
    return Reservation(
        namespace=namespace, job=job, queue=need("queue", lambda v: isinstance(v, str) and v, "must be a queue name"),
        gpus=need("gpus", lambda v: number(v) and v > 0, "must be > 0"), replicas=replicas, nodes=nodes,
        gpu_indices=indices, expires_at=_moment(expires),
        priority=value["priority"] if isinstance(value.get("priority"), int) else 50,
    )


def _moment(text: str) -> float | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo else None


def write_reservations(client, add: list[Reservation], stale: set[str], check) -> None:
    """Add `add` and drop the `stale` keys (expired, or whose pods are bound) in one
    optimistic write of the ConfigMap, read again on a conflict. `check` runs before each
    write (it raises when the planning lease was lost)."""
    for _ in range(5):
        check()
        config_map = client.read_config_map(RESERVATIONS_CONFIGMAP)
        data = dict((config_map or {}).get("data") or {})
        new = {key: value for key, value in data.items() if key not in stale}
        new.update({r.key: r.value() for r in add})
        if config_map is None:
            if not new or client.create_config_map(RESERVATIONS_CONFIGMAP, new) is not None:
                return
        elif new == data or client.replace_config_map(RESERVATIONS_CONFIGMAP, new,
                                                      config_map["metadata"]["resourceVersion"]) is not None:
            return
    raise ClusterBusy(f"{client.where}: ConfigMap {client.settings.namespace}/{RESERVATIONS_CONFIGMAP}: "
                      "another writer changed it 5 times in a row; the reservation was not written")
