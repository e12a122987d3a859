"""Dynamic Resource Allocation (resource.k8s.io/v1), read only: physical GPUs, never devices.

NVIDIA's DRA driver (`gpu.nvidia.com`) publishes each node's GPUs as ResourceSlices: one
pool per node (`spec.pool`: name, generation, resourceSliceCount), devices with attributes
`type` (gpu, mig), `uuid`, `parentUUID` (a MIG device's GPU), `productName`, `profile`, and
partitionable devices drawing on `sharedCounters` (one counter set per physical GPU). Pods
ask through ResourceClaims (their own, or made from a ResourceClaimTemplate), allocated in
`status.allocation.devices.results` and reserved in `status.reservedFor`. So:

- a node's GPUs are its distinct physical GPUs: device `uuid`, or `parentUUID`, or the
  counter set a device consumes; a pool counts at its highest `generation` and only when all
  `resourceSliceCount` slices of it are there (else it is skipped, with a warning);
- a pod holds the distinct physical GPUs of its allocated claims (a whole GPU each; a MIG
  device its profile's memory share); a claim reserved by several pods counts once, on the
  first of them; a claim made by the extended-resource bridge is not counted (the pod's
  `nvidia.com/gpu` limit is);
- a pod not bound yet (waiting, or released onto a node) asks for its claims' requests: `exactly.count` devices of a GPU class
  (`allocationMode: All`: a whole node's GPUs); a CEL selector comparing `productName` is the
  GPU model; any other CEL selector is counted, not interpreted, with a warning;
- a device tainted `NoSchedule` or `NoExecute` (by its driver, in the slice's `taints`, or by
  a DeviceTaintRule selecting it by driver, pool and device name) makes its physical GPU take
  no new work, as an unhealthy GPU; a pod holding a device tainted `NoExecute` that its claim
  does not tolerate is named in a warning (Kubernetes evicts it). A rule whose selector has
  other fields is not applied, with a warning.
Sources: docs/kubernetes.md, "DRA".
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

from gpu_policy.model.fields import MAX_GPUS_PER_NODE, show
from gpu_policy.kubernetes.read.devices import gpu_memory_gb, mig_fraction
from gpu_policy.kubernetes.read.nodes import NodeView
from gpu_policy.kubernetes.read.pods import PodView
from gpu_policy.model.placement import BLOCKING_EFFECTS, Constraints

NVIDIA_DRIVER = "gpu.nvidia.com"
_DRIVER = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")
_SELECTED_BY = ("driver", "pool", "device")  # what a DeviceTaintRule's selector may name, in a device's terms
_PRODUCT = re.compile(r"""device\.attributes\[["']([^"']+)["']\]\.productName\s*==\s*["']([^"']+)["']""")


@dataclass
class DraView:
    """What one look read from the DRA objects, for the snapshot."""

    node_gpus: dict[str, int] = field(default_factory=dict)  # node -> physical GPUs
    node_model: dict[str, str] = field(default_factory=dict)  # node -> GPU model (productName)
    node_tainted: dict[str, list[int]] = field(default_factory=dict)  # node -> its tainted GPUs (indices)
    holders: dict[str, float] = field(default_factory=dict)  # pod uid -> GPUs its allocated claims hold
    demand: dict[str, tuple[float, list[str] | None]] = field(default_factory=dict)  # pod uid -> (GPUs, models)
    warnings: list[str] = field(default_factory=list)


def _attr(device: dict, name: str):
    value = ((device.get("attributes") or {}).get(name)) or {}
    return next(iter(value.values()), None) if isinstance(value, dict) else None


def model_name(product: str) -> str:
    """productName as GPU feature discovery writes the model label (spaces as dashes)."""
    return "-".join(str(product).split())


def _gpu_drivers(classes: list[dict]) -> dict[str, str]:
    """DeviceClass name -> the driver its CEL selectors name (only classes that name one)."""
    out = {}
    for cls in classes:
        for sel in ((cls.get("spec") or {}).get("selectors") or []):
            found = _DRIVER.search(str((sel.get("cel") or {}).get("expression", "")))
            if found:
                out[str((cls.get("metadata") or {}).get("name", ""))] = found.group(1)
    return out


def _pool(slice_: dict) -> dict:
    return ((slice_.get("spec") or {}).get("pool")) or {}


def _complete_slices(slices: list[dict], warnings: list[str]) -> list[dict]:
    """The slices of each pool at its highest generation; pools missing slices are skipped."""
    pools: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for s in slices:
        spec = s.get("spec") or {}
        pools[(str(spec.get("driver", "")), str(_pool(s).get("name", "")))].append(s)
    out = []
    for (driver, pool), members in sorted(pools.items()):
        top = max(int(_pool(m).get("generation", 0) or 0) for m in members)
        current = [m for m in members if int(_pool(m).get("generation", 0) or 0) == top]
        want = max(int(_pool(m).get("resourceSliceCount", 1) or 1) for m in current)
        if len(current) < want:
            warnings.append(f"ResourceSlice pool {driver}/{pool}: {len(current)} of {want} slices of generation "
                            f"{top} are published: skipped until it is complete")
            continue
        out += current
    return out


def publishes_gpus(slices: list[dict]) -> bool:
    """Whether some ResourceSlice is NVIDIA's DRA driver's: GPUs that count on a look without claims."""
    return any((s.get("spec") or {}).get("driver") == NVIDIA_DRIVER for s in slices)


def read_dra(slices: list[dict], claims: list[dict], templates: list[dict], classes: list[dict],
             pods: list[PodView], taint_rules: list[dict] = ()) -> DraView:
    """Physical GPUs per node (and those tainted), GPUs held by pods, and GPUs pending pods ask for."""
    view = DraView()
    drivers = _gpu_drivers(classes)
    gpu_classes = {name for name, driver in drivers.items() if driver == NVIDIA_DRIVER}
    physical, taints = _read_slices(view, slices, _taint_rules(taint_rules, view.warnings))
    _holders(view, claims, physical, taints)
    _demand(view, pods, {_key(c): c for c in claims}, {_key(t): t for t in templates}, gpu_classes)
    return view


def _read_slices(view: DraView, slices: list[dict], rules: list[tuple[dict, dict]]) -> tuple[dict, dict]:
    """Each node's physical GPUs, model and tainted GPUs (into `view`) from NVIDIA's complete
    ResourceSlices; returns, by (driver, pool, device), the device's (GPU key, share) and its taints."""
    physical: dict[tuple[str, str, str], tuple[str, float]] = {}  # (driver, pool, device) -> (GPU key, share)
    taints: dict[tuple[str, str, str], list[dict]] = {}  # (driver, pool, device) -> its NoSchedule/NoExecute taints
    per_node: dict[str, dict[str, bool]] = defaultdict(dict)  # node -> GPU key -> tainted, in the slices' order
    for s in _complete_slices(slices, view.warnings):
        spec = s.get("spec") or {}
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        node = spec.get("nodeName")
        if driver != NVIDIA_DRIVER:
            continue
        if not node:
            view.warnings.append(f"ResourceSlice {(s.get('metadata') or {}).get('name', '')}: devices not bound to one "
                                 "node (nodeSelector, allNodes) are not planned")
            continue
        for device in spec.get("devices") or []:
            where = (driver, pool, str(device.get("name", "")))
            key = _physical_key(device, pool)
            physical[where] = (key, _share(device))
            taints[where] = _device_taints(device, where, rules)
            per_node[node][key] = per_node[node].get(key, False) or bool(taints[where])
            product = model_name(_attr(device, "productName") or "")
            if product:
                view.node_model.setdefault(node, product)
    view.node_gpus = {node: len(keys) for node, keys in per_node.items()}
    view.node_tainted = {node: [i for i, tainted in enumerate(keys.values()) if tainted]
                         for node, keys in per_node.items() if any(keys.values())}
    return physical, taints


def _share(device: dict) -> float:
    """The part of its physical GPU a device is: a MIG device its profile's memory share, else all."""
    if _attr(device, "type") != "mig":
        return 1.0
    memory = gpu_memory_gb({"nvidia.com/gpu.product": str(_attr(device, "productName") or "")})
    return mig_fraction(str(_attr(device, "profile") or ""), memory) or 1.0


def _taint_rules(rules: list[dict], warnings: list[str]) -> list[tuple[dict, dict]]:
    """(selector, taint) of the DeviceTaintRules that keep new work off devices. A rule without a
    selector selects no device; one whose selector has fields other than driver, pool and device
    (deviceClassName and CEL selectors of the alpha API) is not applied, with a warning."""
    out = []
    for rule in rules:
        spec = rule.get("spec") or {}
        selector, taint = spec.get("deviceSelector"), spec.get("taint") or {}
        if selector is None or taint.get("effect") not in BLOCKING_EFFECTS:
            continue
        other = sorted(set(selector) - set(_SELECTED_BY))
        if other:
            warnings.append(f"DeviceTaintRule {(rule.get('metadata') or {}).get('name', '')}: "
                            f"spec.deviceSelector.{other[0]} is not interpreted: the rule is not applied")
            continue
        out.append((selector, taint))
    return out


def _device_taints(device: dict, where: tuple[str, str, str], rules: list[tuple[dict, dict]]) -> list[dict]:
    """The device's taints that keep new work off it: its driver's, and the rules' that select it
    (an unknown effect is no effect, as the API says)."""
    own = [t for t in device.get("taints") or [] if t.get("effect") in BLOCKING_EFFECTS]
    return own + [taint for selector, taint in rules
                  if all(selector.get(k) in (None, v) for k, v in zip(_SELECTED_BY, where))]


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _physical_key(device: dict, pool: str) -> str:
    """The physical GPU behind a device: its uuid, its parent's, or the counter set it draws on."""
    for name in ("parentUUID", "uuid"):
        if _attr(device, name):
            return str(_attr(device, name))
    counters = [c.get("counterSet") for c in device.get("consumesCounters") or [] if c.get("counterSet")]
    return f"{pool}/{counters[0]}" if counters else f"{pool}/{device.get('name', '')}"


def _holders(view: DraView, claims: list[dict], physical: dict, taints: dict) -> None:
    """Each allocated claim's GPUs once, on the first pod that reserves it; a pod whose claim holds
    a device tainted NoExecute, not tolerated, is named in a warning."""
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        pods = sorted((r.get("name", ""), r.get("uid", "")) for r in status.get("reservedFor") or []
                      if r.get("resource") == "pods")
        if not results or not pods or _bridged(claim):
            continue
        gpus: dict[str, float] = {}
        evicting = []
        for r in results:
            where = (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
            found = physical.get(where)
            if found:
                gpus[found[0]] = min(1.0, gpus.get(found[0], 0.0) + found[1])
            evicting += [(where[2], t) for t in _evicting(taints.get(where, []),
                                                          _tolerations(claim, str(r.get("request", ""))))]
        if evicting:
            device, taint = evicting[0]
            view.warnings.append(f"pod {_key(claim)[0]}/{pods[0][0]}: its claim {_key(claim)[1]} holds device {device} "
                                 f"tainted {taint.get('key', '')}:NoExecute, which it does not tolerate: Kubernetes "
                                 "evicts it")
        if gpus:
            uid = pods[0][1]
            view.holders[uid] = view.holders.get(uid, 0.0) + sum(gpus.values())


def _tolerations(claim: dict, request: str) -> Constraints:
    """The tolerations of the claim's request named `request` (a subrequest: its parent's)."""
    for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if r.get("name") == request.split("/")[0]:
            return Constraints(tolerations=tuple(
                (t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or "")
                for t in (r.get("exactly") or {}).get("tolerations") or []))
    return Constraints()


def _evicting(taints: list[dict], tolerations: Constraints) -> list[dict]:
    return [t for t in taints if t.get("effect") == "NoExecute" and not tolerations.tolerates(t)]


def _bridged(claim: dict) -> bool:
    """A claim the scheduler made for a pod's extended-resource request (counted by that request)."""
    notes = (claim.get("metadata") or {}).get("annotations") or {}
    return "resource.kubernetes.io/extended-resource-claim" in notes


def _demand(view: DraView, pods: list[PodView], claims: dict, templates: dict, gpu_classes: set[str]) -> None:
    """GPUs a pod not bound yet asks for through its claims, and the models their selectors name
    (a pod released onto a node holds them there until the scheduler allocates its claims)."""
    largest = max(view.node_gpus.values(), default=0)
    for pod in pods:
        if pod.bound or not pod.claims:
            continue
        gpus, models = 0.0, None
        for claim_name, template_name in pod.claims:
            for request in _requests(view, pod, claim_name, template_name, claims, templates):
                exactly = request.get("exactly") or {}
                if exactly.get("deviceClassName") in gpu_classes:
                    gpus += _count(view, pod, exactly, largest)
                    models = _models(view, pod, exactly) or models
        if gpus:
            view.demand[pod.uid] = (gpus, models)


def _requests(view: DraView, pod: PodView, claim_name: str | None, template_name: str | None, claims: dict,
              templates: dict) -> list[dict]:
    """The device requests of one of the pod's claims: its ResourceClaim's, else its template's
    (none, with a warning, when neither exists yet)."""
    source = claims.get((pod.namespace, claim_name)) if claim_name else templates.get((pod.namespace, template_name))
    if source is None:
        view.warnings.append(f"pod {pod.full_name}: its claim {claim_name or template_name} does not exist "
                             "yet: not counted")
        return []
    spec = source.get("spec") or {}
    if not claim_name:  # a template holds the claim's spec under spec.spec
        spec = spec.get("spec") or {}
    return (spec.get("devices") or {}).get("requests") or []


def _count(view: DraView, pod: PodView, exactly: dict, largest: int) -> float:
    """The GPUs one request of a GPU class asks for (allocationMode All: a whole node's)."""
    if exactly.get("allocationMode") == "All":
        view.warnings.append(f"pod {pod.full_name}: a claim with allocationMode All is counted as a "
                             f"whole node's GPUs ({largest})")
        return largest
    if not 1 <= (exactly.get("count") or 1) <= MAX_GPUS_PER_NODE:
        view.warnings.append(f"pod {pod.full_name}: a claim asks for {show(exactly.get('count'))} "
                             f"devices, not 1 to {MAX_GPUS_PER_NODE:,}: not counted")
        return 0
    return exactly.get("count") or 1


def _models(view: DraView, pod: PodView, exactly: dict) -> list[str] | None:
    """The GPU model the request's CEL selectors name (the last that names one); any other
    selector is counted, not interpreted, with a warning."""
    models = None
    for sel in exactly.get("selectors") or []:
        expression = str((sel.get("cel") or {}).get("expression", ""))
        found = _PRODUCT.search(expression)
        if found and found.group(1) == NVIDIA_DRIVER and model_name(found.group(2)):
            models = [model_name(found.group(2))]
        else:
            view.warnings.append(f"pod {pod.full_name}: CEL selector {expression[:80]!r} is counted, "
                                 "not interpreted")
    return models


def with_dra(pod: PodView, view: DraView) -> PodView:
    """The pod with the GPUs its claims hold or ask for added to what it requests."""
    held = view.holders.get(pod.uid)
    asked = view.demand.get(pod.uid)
    if held:
        return dataclasses.replace(pod, gpus=_gpus(pod.gpus + held))
    if asked:
        return dataclasses.replace(pod, gpus=_gpus(pod.gpus + asked[0]), gpu_model=asked[1] or pod.gpu_model)
    return pod


def with_dra_nodes(nodes: list[NodeView], view: DraView) -> list[NodeView]:
    """Nodes with the physical GPUs their ResourceSlices publish (and the model, when unlabelled);
    their tainted GPUs take no new work, as unhealthy ones."""
    return [dataclasses.replace(n, gpus=view.node_gpus[n.name], gpu_model=n.gpu_model or view.node_model.get(n.name),
                                unhealthy_gpus=sorted(set(n.unhealthy_gpus) | set(view.node_tainted.get(n.name, []))))
            if n.name in view.node_gpus else n for n in nodes]


def _gpus(value: float) -> float:
    """Whole GPUs, or a fraction of one (parts of several GPUs hold them whole)."""
    if value > 1:
        return math.ceil(value - 1e-9)
    return int(value) if float(value).is_integer() else round(value, 6)
