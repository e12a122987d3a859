"""Physical GPUs behind what a node advertises: GPUs shared by time-slicing or MPS, and MIG.

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

MIG (the device plugin's `mixed` strategy): a node advertises `nvidia.com/mig-<profile>`
slices, and GFD labels `nvidia.com/gpu.count` (physical GPUs) and `nvidia.com/gpu.memory`
(one GPU's memory, MiB). A slice is its memory share of the GPU (`mig_fraction`), and a pod
asking for one slice of a profile is a MIG job of that profile. With the `single` strategy
(GFD's `nvidia.com/mig.strategy: single`) every GPU of the node is cut into slices of one
profile, advertised as `nvidia.com/gpu`, and GFD overrides the product (`<GPU>-MIG-<profile>`),
the count and the memory with the slices'; a pod asking for `nvidia.com/gpu` there, or
selecting such a product, asks for slices (`single_mig`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from functools import cached_property

from gpu_policy.model.fields import MAX_GPUS_PER_NODE, Invalid, mig_layout, show
from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.read.pods import PodView
from gpu_policy.model import GpuSharing

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB of one GPU
MIG_RESOURCE_PREFIX = "mig-"  # after the GPU resource's vendor: nvidia.com/mig-1g.10gb
_PROFILE = re.compile(r"^\d{1,3}g\.(\d{1,6})gb")
_MODEL_MEMORY = re.compile(r"(?<!\d)(\d{1,6})GB", re.IGNORECASE)
SHARED_SUFFIX = "-SHARED"  # appended to nvidia.com/gpu.product on a shared node
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
_SINGLE_PRODUCT = re.compile(r"^(.+)-MIG-(\d{1,3}g\.\d{1,6}gb(?:\+me)?)$")  # GFD's product under `single`
_STRATEGIES = ("time-slicing", "mps")


def read_sharing(labels: dict, where: str) -> GpuSharing | None:
    """The node's GPU sharing from its GFD labels; None when its GPUs are not shared."""
    text = labels.get(REPLICAS_LABEL)
    strategy = labels.get(SHARING_STRATEGY_LABEL)
    if text is None or str(text).strip() in ("", "1") or strategy == "none":
        return None
    value = str(text).strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 4 and 2 <= int(value) <= 1024):
        raise ClusterObjectError(where, f"metadata.labels.{REPLICAS_LABEL}",
                                 f"must be a whole number from 1 to 1,024, got {show(text)}")
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


def mig_slices(allocatable: dict, gpu_resource: str, where: str) -> dict[str, int]:
    """MIG profile -> slices the node advertises (`<vendor>/mig-<profile>` in allocatable),
    within what a scenario's `mig:` may describe (else the node is bad input)."""
    prefix = gpu_resource.split("/")[0] + "/" + MIG_RESOURCE_PREFIX
    out = {}
    for key, value in allocatable.items():
        if not key.startswith(prefix):
            continue
        text = str(value)
        if not (text.isascii() and text.isdigit() and len(text) <= 5 and int(text) <= 8 * MAX_GPUS_PER_NODE):
            raise ClusterObjectError(where, f"status.allocatable.{key}", f"must be a whole number of MIG slices "
                                     f"from 0 to {8 * MAX_GPUS_PER_NODE:,}, got {show(value)}")
        if int(text) > 0:
            out[key[len(prefix):]] = int(text)
    try:
        return mig_layout(out)
    except Invalid as e:
        raise ClusterObjectError(where, "status.allocatable", f"MIG slices {e}") from None


def gpu_memory_gb(labels: dict) -> float | None:
    """One GPU's memory in GB: GFD's `nvidia.com/gpu.memory` (MiB), else the product name's "80GB"."""
    text = str(labels.get(GPU_MEMORY_LABEL, ""))
    if text.isascii() and text.isdigit() and len(text) <= 9 and int(text) > 0:
        return int(text) / 1024
    found = _MODEL_MEMORY.search(str(labels.get("nvidia.com/gpu.product", "")))
    return float(found.group(1)) if found else None


def mig_fraction(profile: str, memory_gb: float | None) -> float | None:
    """A MIG slice's share of its GPU: the profile's memory over the GPU's, in eighths (the
    memory slices of every MIG GPU but the A30's four quarters, which eighths also hold
    exactly); None when either memory is unknown. 1g.10gb on an 80 GB A100 is 1/8."""
    found = _PROFILE.match(profile)
    if not found or not memory_gb:
        return None
    eighths = min(8, max(1, round(8 * int(found.group(1)) / memory_gb)))
    return eighths / 8


def mig_gpus(slices: dict[str, int], whole: int, labels: dict, memory_gb: float | None) -> int:
    """Physical GPUs of a node with MIG slices: GFD's count, else whole GPUs plus the slices' shares."""
    text = str(labels.get(GPU_COUNT_LABEL, ""))
    if text.isascii() and text.isdigit() and len(text) <= 6:
        return int(text)
    return whole + math.ceil(sum(n * (mig_fraction(p, memory_gb) or 1) for p, n in slices.items()) - 1e-9)


def single_mig(product: str | None) -> tuple[str, str] | None:
    """(the GPU's product, the MIG profile) of a product as GFD writes it under the `single`
    strategy (`NVIDIA-A100-SXM4-80GB-MIG-1g.10gb`); None for any other product."""
    found = _SINGLE_PRODUCT.match(product or "")
    return (found.group(1), found.group(2)) if found else None


def single_mig_gpus(profile: str, slices: int, memory_gb: float | None) -> int:
    """Physical GPUs behind `slices` slices of one profile, each GPU holding as many as fit (the
    MIG manager's `all-<profile>` layouts): 7 compute slices, and 8 memory eighths, per GPU."""
    share = mig_fraction(profile, memory_gb)
    per_gpu = 7 // int(profile.split("g.")[0])
    if share:
        per_gpu = min(per_gpu, round(1 / share))
    return math.ceil(slices / max(1, per_gpu))


@dataclass(frozen=True)
class Devices:
    """What a look reads of its nodes' devices to count a pod's request in physical GPUs:
    node -> its sharing; node -> its MIG slices and one GPU's memory; node -> the one profile of
    a node under the `single` MIG strategy (where `nvidia.com/gpu` are slices)."""

    sharing: dict[str, GpuSharing] = field(default_factory=dict)
    mig: dict[str, tuple[dict[str, int], float | None]] = field(default_factory=dict)
    single: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: list) -> Devices:
        """The devices of these nodes (NodeViews)."""
        return cls({n.name: n.sharing for n in nodes if n.sharing},
                   {n.name: (n.mig, n.memory_gb) for n in nodes if n.mig},
                   {n.name: next(iter(n.mig)) for n in nodes if n.mig_single and n.mig})

    @cached_property
    def fewest(self) -> int | None:
        """The fewest replicas of any shared node's GPUs (the largest share a waiting pod may get)."""
        return min((s.replicas for s in self.sharing.values()), default=None)


def physical_request(pod: PodView, devices: Devices) -> PodView:
    """A pod as a holder of physical GPUs: shared replicas (`_shared_replicas`), and MIG slices
    asked for as such or as `nvidia.com/gpu` (`_single_request`, `_mig_request`)."""
    return _mig_request(_single_request(_shared_replicas(pod, devices), devices.single), devices.mig)


def _single_request(pod: PodView, single: dict[str, str]) -> PodView:
    """`nvidia.com/gpu` asked for as MIG slices: by a pod on a node under the `single` strategy,
    or by a waiting pod selecting such a product (its model is then the GPU's)."""
    count = int(pod.gpus) if pod.gpus >= 1 and float(pod.gpus).is_integer() else 0
    wanted = {single_mig(m) for m in pod.gpu_model or []} if not pod.node else set()
    if count and pod.node in single:
        return dataclasses.replace(pod, gpus=0, mig_request=(single[pod.node], count))
    if count and len(wanted) == 1 and None not in wanted:
        (product, profile), = wanted
        return dataclasses.replace(pod, gpus=0, mig_request=(profile, count), gpu_model=[product])
    return pod


def _mig_request(pod: PodView, mig: dict[str, tuple[dict[str, int], float | None]]) -> PodView:
    """A pod asking for one MIG slice holds its profile's share of a GPU: on its node's GPUs when
    bound, else the largest share on any node offering the profile."""
    if pod.mig_request is None:
        return pod
    profile, count = pod.mig_request
    where = [pod.node] if pod.node else [n for n, (slices, _) in mig.items() if profile in slices]
    shares = [f for f in (mig_fraction(profile, mig[n][1]) for n in where if n in mig) if f]
    if count != 1 or not shares:
        why = (f"asks for {count} MIG slices of {profile}: one slice per pod is planned" if count != 1
               else f"asks for MIG slices of {profile}, which no node with a known GPU memory offers")
        return dataclasses.replace(pod, unreadable=why)
    return dataclasses.replace(pod, gpus=max(shares), mig_profile=profile)


def _shared_replicas(pod: PodView, devices: Devices) -> PodView:
    """A pod as a holder of physical GPUs: one holding k replicas on a node shared R ways holds
    k/R of a GPU; a waiting pod asking for the shared resource asks for k/R, R being the fewest
    replicas of any shared node (the largest share it may get). A pod holding a whole GPU's
    replicas or more on a shared node cannot be planned as a fraction: it is unmanaged."""
    fewest = devices.fewest
    on = devices.sharing.get(pod.node) if pod.node else None
    replicas = on.replicas if on else (fewest if pod.shared_devices else None)
    amount = pod.shared_devices or (pod.gpus if on and pod.gpus >= 1 else 0)
    if not replicas or not amount:
        if pod.shared_devices and fewest is None:
            return dataclasses.replace(pod, unreadable="asks for shared GPUs, but no node shares its GPUs")
        return pod
    if amount >= replicas:  # unmanaged, holding the GPUs its replicas may span
        return dataclasses.replace(pod, gpus=math.ceil(amount / replicas), unreadable=(
            f"holds {amount:g} replicas of GPUs shared {replicas} ways, not a fraction of one"))
    return dataclasses.replace(pod, gpus=round(amount / replicas, 6))
