"""Reservations: GPUs promised to a step whose pods do not exist yet.

The ConfigMap `gpu-policy-reservations` in gpu-policy's namespace holds one key per
reserved job, ``<namespace>.<job>`` (a key cannot hold ``/``, a namespace holds no
``.``, so the key splits at its first dot), whose value is a JSON object
``{queue, gpus, replicas, nodes, gpu_indices, expires_at}`` (plus ``priority`` and ``job``).
A key longer than a ConfigMap allows (253 characters: a long namespace and a pod-named
job) keeps its start and ends in a hash of the job's name; the value's ``job`` gives the
name back. Every observation counts unexpired reservations as running jobs and drops those
whose pods are all bound; only writes under the planning lease remove them from the ConfigMap.

What gpu-policy writes is checked with the scenario's own field checks before it is
written (`Reservation.check`), and read back as untrusted: a value that breaks them is
left out with a warning and dropped at the next write.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from gpu_policy.model.fields import JOB_FIELDS, Invalid
from gpu_policy.errors import ClusterObjectError, InputError
from gpu_policy.kubernetes.names import RESERVATIONS_CONFIGMAP
from gpu_policy.model.safe_load import parse_json


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
        return key_of(self.job_name)

    @property
    def job_name(self) -> str:
        return f"{self.namespace}/{self.job}"

    def check(self) -> None:
        """Raise ClusterObjectError naming the field when what would be written could not be
        read back: the reader's own checks (`_parse`) run on it, so one rule serves both."""
        where = f"reservation for {self.job_name}"
        if isinstance(self.expires_at, bool) or not isinstance(self.expires_at, (int, float)) or \
                not 0 <= self.expires_at < _LATEST:
            raise ClusterObjectError(where, "expires_at", f"must be a time before the year 5000, got {self.expires_at!r}")
        _parse(self.key, self.value(), where)

    def value(self) -> str:
        return json.dumps({"job": self.job, "queue": self.queue, "gpus": self.gpus, "replicas": self.replicas,
                           "nodes": self.nodes, "gpu_indices": self.gpu_indices, "priority": self.priority,
                           "expires_at": datetime.fromtimestamp(self.expires_at, timezone.utc)
                           .strftime("%Y-%m-%dT%H:%M:%SZ")}, separators=(",", ":"))


#: the longest ConfigMap key (a DNS subdomain's length), and what a key may hold
MAX_KEY = 253
_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_HASH = 16
_LATEST = 95_617_584_000  # 5000-01-01, seconds since the epoch


def key_of(job_name: str) -> str:
    """The ConfigMap key of the job ``NAMESPACE/NAME``: ``NAMESPACE.NAME``, or when that is
    longer than 253 characters, its first 236 and a hash of NAME."""
    namespace, _, job = job_name.partition("/")
    key = f"{namespace}.{job}"
    if len(key) <= MAX_KEY:
        return key
    return f"{key[:MAX_KEY - _HASH - 1]}-{hashlib.sha256(job.encode()).hexdigest()[:_HASH]}"


def read_reservations(config_map: dict | None) -> tuple[list[Reservation], dict[str, str]]:
    """Every reservation the ConfigMap holds (none when it does not exist), and the keys
    that cannot be read, each with its warning (read back as untrusted: never fatal)."""
    if config_map is None:
        return [], {}
    where = f"ConfigMap {(config_map.get('metadata') or {}).get('namespace')}/{RESERVATIONS_CONFIGMAP}"
    data = config_map.get("data")
    good, bad = [], {}
    for key, text in sorted(data.items() if isinstance(data, dict) else []):
        try:
            good.append(_parse(str(key), text, where))
        except ClusterObjectError as e:
            bad[str(key)] = f"{e}: ignored, and dropped at the next write"
    return good, bad


def _parse(key: str, text, where: str) -> Reservation:
    namespace, tail, value = _key_and_value(key, text, where)
    fields = _Fields(value, where, f"data.{key}")
    job = value.get("job", tail)
    if not isinstance(job, str) or not job or key_of(f"{namespace}/{job}") != key:
        raise ClusterObjectError(where, f"data.{key}.job", "must be the job's name, whose key this is")
    replicas = fields.checked("replicas")
    nodes = fields.need("nodes", lambda v: isinstance(v, list) and len(v) == replicas and all(isinstance(n, str)
                                                                                           for n in v),
                        "must list one node per replica")
    indices = value.get("gpu_indices")
    if indices is not None and not (isinstance(indices, list) and len(indices) == replicas and all(
            isinstance(ix, list) and all(isinstance(i, int) and i >= 0 for i in ix) for ix in indices)):
        raise ClusterObjectError(where, f"data.{key}.gpu_indices", "must list GPU indices per replica, "
                                                                     f"got {json.dumps(indices)}")
    expires = fields.need("expires_at", lambda v: isinstance(v, str) and _moment(v) is not None,
                          "must be an RFC 3339 time in UTC")
    return Reservation(
        namespace=namespace, job=job, queue=fields.checked("queue"), gpus=fields.checked("gpus"), replicas=replicas,
        nodes=nodes, gpu_indices=indices, expires_at=_moment(expires),
        priority=fields.checked("priority") if "priority" in value else 50,
    )


def _key_and_value(key: str, text, where: str) -> tuple[str, str, dict]:
    """(namespace, the rest of the key, the JSON object) of one key <namespace>.<job> and its value."""
    namespace, dot, tail = key.partition(".")
    if not dot or not namespace or not tail or not isinstance(text, str) or not _KEY.fullmatch(key) or \
            len(key) > MAX_KEY:
        raise ClusterObjectError(where, f"data.{key}", "the key must be <namespace>.<job> and its value a string")
    try:
        value = parse_json(text, f"{where}: data.{key}")  # bounded: size, depth, finite numbers
    except (InputError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise ClusterObjectError(where, f"data.{key}", "must be a JSON object {queue, gpus, replicas, nodes, "
                                                       "gpu_indices, expires_at}")
    return namespace, tail, value


class _Fields:
    """The fields of one reservation's value (at `path` of `where`), each checked as it is read."""

    def __init__(self, value: dict, where: str, path: str):
        self.value, self.where, self.path = value, where, path

    def need(self, name: str, check, problem: str):
        """The field, which `check` must accept."""
        if name not in self.value or not check(self.value[name]):
            raise ClusterObjectError(self.where, f"{self.path}.{name}",
                                     f"{problem}, got {json.dumps(self.value.get(name))}")
        return self.value[name]

    def checked(self, name: str):
        """The field, by the scenario's own check of the job field of that name."""
        if name not in self.value:
            raise ClusterObjectError(self.where, f"{self.path}.{name}", "is required")
        try:
            return JOB_FIELDS[name](self.value[name])
        except Invalid as e:
            raise ClusterObjectError(self.where, f"{self.path}.{name}", str(e)) from None


def _moment(text: str) -> float | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo else None
