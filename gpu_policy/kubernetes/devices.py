"""Physical GPUs behind what a node advertises: GPUs shared by time-slicing or MPS.

NVIDIA's device plugin offers each GPU of a shared node as `replicas` devices, and GPU
feature discovery (GFD) labels the node with the physical count and the sharing
(docs/kubernetes.md, "GPUs shared by time-slicing or MPS", cites the sources):

- `nvidia.com/gpu.replicas`: the devices offered per physical GPU ("1": not shared);
- `nvidia.com/gpu.sharing-strategy`: `time-slicing`, `mps` or `none`;
- `nvidia.com/gpu.count`: the physical GPUs;
- `nvidia.com/gpu.product`: the model, with `-SHARED` appended when the plugin renames
  nothing (so that a selector on the model tells shared GPUs apart);
- the resource is `nvidia.com/gpu`, or `nvidia.com/gpu.shared` with `renameByDefault`.

gpu-policy plans physical GPUs: a shared node of 8 GPUs shared 4 ways has 8, and a pod
holding k of its replicas holds k/4 of a GPU, as a fraction.
"""

from __future__ import annotations

import dataclasses
import json
import math

from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.pods import PodView
from gpu_policy.model import GpuSharing

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
SHARED_SUFFIX = "-SHARED"  # appended to nvidia.com/gpu.product on a shared node
_STRATEGIES = ("time-slicing", "mps")


def read_sharing(labels: dict, where: str) -> GpuSharing | None:
    """The node's GPU sharing from its GFD labels; None when its GPUs are not shared."""
    text = labels.get(REPLICAS_LABEL)
    strategy = labels.get(SHARING_STRATEGY_LABEL)
    if text is None or str(text).strip() in ("", "1") or strategy == "none":
        return None
    value = str(text).strip()
    if not (value.isascii() and value.isdigit() and 2 <= int(value) <= 1024):
        raise ClusterObjectError(where, f"metadata.labels.{REPLICAS_LABEL}",
                                 f"must be a whole number from 1 to 1,024, got {json.dumps(text)}")
    if strategy not in _STRATEGIES:  # GFD before the strategy label: replicas were time-slicing only
        strategy = "time-slicing"
    return GpuSharing(strategy, int(value))


def physical_gpus(devices: int, sharing: GpuSharing | None) -> int:
    """Physical GPUs behind `devices` advertised devices (the plugin offers whole GPUs' replicas)."""
    return devices if sharing is None else devices // sharing.replicas


def gpu_model(product: str | None, sharing: GpuSharing | None) -> str | None:
    """The GPU model without the `-SHARED` mark, so shared and whole GPUs of a model match."""
    if product and sharing is not None and product.endswith(SHARED_SUFFIX):
        return product[: -len(SHARED_SUFFIX)]
    return product


def shared_replicas(pods: list[PodView], sharing: dict[str, GpuSharing]) -> list[PodView]:
    """Pods as holders of physical GPUs: a pod holding k replicas on a node shared R ways holds
    k/R of a GPU; a waiting pod asking for the shared resource asks for k/R, R being the fewest
    replicas of any shared node (the largest share it may get). A pod holding a whole GPU's
    replicas or more on a shared node cannot be planned as a fraction: it is unmanaged."""
    fewest = min((s.replicas for s in sharing.values()), default=None)
    out = []
    for pod in pods:
        on = sharing.get(pod.node) if pod.node else None
        replicas = on.replicas if on else (fewest if pod.shared_devices else None)
        devices = pod.shared_devices or (pod.gpus if on and pod.gpus >= 1 else 0)
        if not replicas or not devices:
            if pod.shared_devices and fewest is None:
                pod = dataclasses.replace(pod, unreadable="asks for shared GPUs, but no node shares its GPUs")
            out.append(pod)
            continue
        if devices >= replicas:  # unmanaged, holding the GPUs its replicas may span
            out.append(dataclasses.replace(pod, gpus=math.ceil(devices / replicas), unreadable=(
                f"holds {devices:g} replicas of GPUs shared {replicas} ways, not a fraction of one")))
            continue
        out.append(dataclasses.replace(pod, gpus=round(devices / replicas, 6)))
    return out
