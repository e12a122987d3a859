"""One node, read once: its GPUs, CPU and memory, its GPU model, labels and taints, and
whether it takes new work."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from gpu_policy.model.fields import MAX_CPU, MAX_GPUS_PER_NODE, MAX_MEMORY, show
from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.read.constraints import node_taints
from gpu_policy.kubernetes.read.devices import (MIG_STRATEGY_LABEL, gpu_memory_gb, gpu_model, mig_gpus, mig_slices,
                                           physical_gpus, read_sharing, single_mig, single_mig_gpus)
from gpu_policy.kubernetes.names import (COMPOSABLE_LABEL, GPU_PRODUCT_LABEL, MAX_GPUS_ANNOTATION,
                                         SHARED_RESOURCE_SUFFIX, UNHEALTHY_GPUS_ANNOTATION)
from gpu_policy.kubernetes.read.quantity import gib, parse_quantity
from gpu_policy.model import GpuSharing


@dataclass
class NodeView:
    name: str
    gpus: int  # physical GPUs: status.allocatable of the GPU resource, less their sharing (devices.py)
    cpu: float | None
    memory_gib: float | None
    gpu_model: str | None
    no_new_work: str | None  # why the node takes no new work (cordoned, not Ready), else None
    unhealthy_gpus: list[int] = field(default_factory=list)
    max_gpus: int | None = None  # a composable node's most GPUs; None: not composable
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict] = field(default_factory=list)  # NoSchedule/NoExecute, but the GPU and lifecycle ones
    sharing: GpuSharing | None = None  # time-slicing or MPS, from GPU feature discovery's labels
    mig: dict[str, int] = field(default_factory=dict)  # MIG profile -> slices it advertises
    memory_gb: float | None = None  # one GPU's memory (GFD), for the share of a MIG slice
    mig_single: bool = False  # the device plugin's `single` MIG strategy: its nvidia.com/gpu are the slices


class _Gpus(NamedTuple):
    """A node's GPUs as its device plugin and GPU feature discovery advertise them."""

    count: int  # physical GPUs
    mig: dict[str, int]  # MIG profile -> slices
    memory_gb: float | None  # one GPU's memory
    product: str | None  # the GPU product, of the whole GPU under the `single` MIG strategy
    mig_single: bool


def read_node(node: dict, gpu_resource: str) -> NodeView:
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    name = meta.get("name", "")
    where = f"node {name}"
    allocatable = status.get("allocatable") or {}
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    sharing = read_sharing(labels, where)
    gpus = _gpus(allocatable, labels, gpu_resource, sharing, where)
    cpu, memory = _amount(allocatable, "cpu", where), _amount(allocatable, "memory", where)
    for key, value, most in (("cpu", cpu, MAX_CPU), ("memory", memory, MAX_MEMORY * 2 ** 30)):
        if value is not None and not 0 <= value <= most:
            raise ClusterObjectError(where, f"status.allocatable.{key}", f"must be from 0 to {most:,.0f}, got {value}")
    return NodeView(
        name=name, gpus=gpus.count, cpu=None if cpu is None else float(cpu),
        memory_gib=None if memory is None else gib(allocatable["memory"]),
        gpu_model=gpu_model(gpus.product, sharing), no_new_work=_no_new_work(spec, status),
        unhealthy_gpus=_unhealthy(notes.get(UNHEALTHY_GPUS_ANNOTATION), gpus.count, where),
        max_gpus=_max_gpus(notes.get(MAX_GPUS_ANNOTATION), where) if labels.get(COMPOSABLE_LABEL) == "true" else None,
        labels=dict(labels), taints=node_taints(spec, where),
        sharing=sharing, mig=gpus.mig, memory_gb=gpus.memory_gb, mig_single=gpus.mig_single,
    )


def _amount(allocatable: dict, key: str, where: str):
    """The allocatable quantity of `key`; None when the node has none."""
    if key not in allocatable:
        return None
    try:
        return parse_quantity(allocatable[key])
    except ValueError as e:
        raise ClusterObjectError(where, f"status.allocatable.{key}", str(e)) from None


def _gpus(allocatable: dict, labels: dict, gpu_resource: str, sharing: GpuSharing | None, where: str) -> _Gpus:
    """The physical GPUs behind the devices the node advertises: shared replicas, MIG slices
    (the `single` strategy's too) counted back to whole GPUs."""
    resource = gpu_resource + SHARED_RESOURCE_SUFFIX if sharing and gpu_resource not in allocatable else gpu_resource
    devices = _amount(allocatable, resource, where) or 0
    whole = f"must be a whole number from 0 to {MAX_GPUS_PER_NODE:,}"
    if devices != int(devices) or devices < 0:
        raise ClusterObjectError(where, f"status.allocatable.{resource}", f"{whole}, got {devices}")
    gpus = physical_gpus(int(devices), sharing)
    mig, gpu_memory = mig_slices(allocatable, gpu_resource, where), gpu_memory_gb(labels)
    product = labels.get(GPU_PRODUCT_LABEL)
    single = single_mig(product) if labels.get(MIG_STRATEGY_LABEL) == "single" else None
    if single:  # GFD's count and memory are the slices': the GPU's memory is in its product name
        product, profile = single
        gpu_memory = gpu_memory_gb({GPU_PRODUCT_LABEL: product})
        mig = mig_slices({f"{gpu_resource.split('/')[0]}/mig-{profile}": int(devices)}, gpu_resource, where)
        gpus = single_mig_gpus(profile, int(devices), gpu_memory)
    elif mig:
        gpus = mig_gpus(mig, gpus, labels, gpu_memory)
    if gpus > MAX_GPUS_PER_NODE:
        raise ClusterObjectError(where, f"status.allocatable.{resource}",
                                 f"{whole}{' physical GPUs' if gpus != devices else ''}, got {gpus}")
    return _Gpus(gpus, mig, gpu_memory, product, single is not None)


def _no_new_work(spec: dict, status: dict) -> str | None:
    if spec.get("unschedulable"):
        return "unschedulable"
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return "not-ready"
    return None  # a tainted node takes the work that tolerates its taints (`node_taints`)


def _unhealthy(text, gpus: int, where: str) -> list[int]:
    if text is None or str(text).strip() == "":
        return []
    parts = [p.strip() for p in str(text).split(",")]
    if not all(p.isascii() and p.isdigit() and len(p) <= 4 and int(p) < gpus for p in parts):
        raise ClusterObjectError(where, f"metadata.annotations.{UNHEALTHY_GPUS_ANNOTATION}",
                                 f"must be GPU indices below {gpus} separated by commas, got {show(text)}")
    return sorted({int(p) for p in parts})


def _max_gpus(text, where: str) -> int:
    """The max-gpus annotation of a node labelled composable: a whole number of GPUs."""
    field = f"metadata.annotations.{MAX_GPUS_ANNOTATION}"
    if text is None:
        raise ClusterObjectError(where, field, f'is required on a node labelled {COMPOSABLE_LABEL}: "true"')
    value = str(text).strip()
    if not re.fullmatch(r"[0-9]{1,4}", value) or int(value) > 1024:
        raise ClusterObjectError(where, field, f"must be a whole number of GPUs from 0 to 1,024, got {json.dumps(text)}")
    return int(value)
