"""ComposabilityRequests (the CDI operator's `cro.hpsys.ibm.ie.com/v1alpha1`), read once each.

gpu-policy owns one request per (node, GPU model), named by `request_name` and labelled
`app.kubernetes.io/managed-by: gpu-policy`; other requests are read (their GPUs come out of
the pool) and never changed. What the operator does with a request, read from its
controller (CoHDI/composable-resource-operator v0.2.1): it adds a finalizer, copies
`spec.resource` into `status.scalarResource` as it starts work (states NodeAllocating,
Updating, Running), keeps `status.resources` as a map of device resources (each Attaching,
then Online), and writes failures into `status.error` and each resource's `error`. Right
after `size` is patched the request still reads Running with the old resources, so a
request is complete only when all of `complete` holds.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime

from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.names import (CRO_KIND, MANAGED_BY, MANAGED_BY_LABEL, PREVIOUS_SIZE_ANNOTATION,
                                         REQUESTED_AT_ANNOTATION)

#: a Kubernetes object name (DNS subdomain) is at most 253 characters
_MAX_NAME = 253
_HASH = 8


def request_name(node: str, model: str) -> str:
    """``gpu-policy-<node>-<model>``, lower-case, every character but a-z and 0-9 made ``-``
    (runs of them one ``-``), so it is a valid object name; a name longer than 253 characters
    is cut and ends with 8 hex digits of a hash of (node, model), so it stays unique."""
    name = "gpu-policy-" + re.sub(r"[^a-z0-9]+", "-", f"{node}-{model}".lower()).strip("-")
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(f"{node}\0{model}".encode()).hexdigest()[:_HASH]
    return f"{name[:_MAX_NAME - _HASH - 1].rstrip('-')}-{digest}"


@dataclass
class DeviceView:
    """One entry of `status.resources`: a device the operator attaches."""

    name: str
    state: str
    error: str = ""


@dataclass
class RequestView:
    name: str
    node: str  # spec.resource.target_node, else the node of its first device (as the operator's webhook reads it)
    model: str
    size: int  # spec.resource.size: the GPUs this request attaches
    ours: bool
    state: str = ""  # status.state
    error: str = ""  # status.error
    status_size: int | None = None  # status.scalarResource.size: the size the operator works on
    devices: list[DeviceView] = field(default_factory=list)
    deleting: bool = False
    requested_at: float | None = None  # gpu-policy's: when size last changed
    previous_size: int = 0  # gpu-policy's: size before that change (what a rollback restores)
    resource_version: str = ""

    @property
    def online(self) -> int:
        return sum(1 for d in self.devices if d.state == "Online")

    @property
    def complete(self) -> bool:
        """Running, working on the size asked for, with that many devices, all Online."""
        return (not self.deleting and self.state == "Running" and self.status_size == self.size
                and len(self.devices) == self.size and self.online == self.size)

    @property
    def missing(self) -> int:
        """GPUs asked for that are not Online yet."""
        return max(0, self.size - self.online)

    def stage(self) -> str:
        """Where the operator is, in its words: its state, and its error when it has one."""
        state = self.state or "not picked up by the operator yet"
        return f"{state} ({self.error})" if self.error else state

    def waiting(self) -> str:
        """What a job placed on this request's GPUs waits for, in words."""
        return f"waiting for {self.missing} {self.model} to be attached to {self.node}: {self.stage()}"

    def errors(self) -> str:
        """`status.error` and each device's error, verbatim ("" when none)."""
        parts = [f"status.error: {self.error}"] if self.error else []
        parts += [f"{d.name}: {d.error}" for d in self.devices if d.error]
        return "; ".join(parts)


def read_request(obj: dict) -> RequestView | None:
    """A GPU ComposabilityRequest; None for other resource types (cxlmemory). gpu-policy's own
    requests must carry what it wrote: a bad field is a ClusterObjectError naming it."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    resource = spec.get("resource") or {}
    name = str(meta.get("name", ""))
    ours = (meta.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
    if resource.get("type") != "gpu":
        return None
    devices = _devices(status.get("resources"))
    node = resource.get("target_node") or next((d.get("node_name") for d in (status.get("resources") or {}).values()
                                                if isinstance(d, dict) and d.get("node_name")), "")
    size, where = resource.get("size"), f"{CRO_KIND} {name}"
    if not _count(size):
        if ours:
            raise ClusterObjectError(where, "spec.resource.size", f"must be a whole number >= 0, got {size!r}")
        size = 0
    notes = meta.get("annotations") or {}
    scalar = (status.get("scalarResource") or {}).get("size")
    return RequestView(
        name=name, node=str(node), model=str(resource.get("model", "")), size=size, ours=ours,
        state=str(status.get("state") or ""), error=str(status.get("error") or ""),
        status_size=scalar if _count(scalar) else None, devices=devices,
        deleting=bool(meta.get("deletionTimestamp")), requested_at=_moment(notes.get(REQUESTED_AT_ANNOTATION)),
        previous_size=_previous(notes.get(PREVIOUS_SIZE_ANNOTATION)), resource_version=str(meta.get("resourceVersion", "")),
    )


def _devices(resources) -> list[DeviceView]:
    if not isinstance(resources, dict):
        return []
    return [DeviceView(str(k), str(v.get("state") or ""), str(v.get("error") or ""))
            for k, v in sorted(resources.items()) if isinstance(v, dict)]


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _previous(text) -> int:
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 4 else 0


def _moment(text) -> float | None:
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo else None
