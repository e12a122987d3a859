"""What the cluster's admission does to a pod at CREATE: the MutatingAdmissionPolicy that
deploy/ ships (the spec's "Settled details"), played by the fake when `gate_gpu_pods` is on."""

from __future__ import annotations

GATE = "gpu-policy.io/admission"
MANAGED_LABEL = "gpu-policy.io/managed"
FRACTION_ANNOTATION = "gpu-policy.io/gpu-fraction"
GPU = "nvidia.com/gpu"


def asks_for_gpus(pod: dict) -> bool:
    """Any container or init container requests or limits nvidia.com/gpu, or the pod asks for a
    fraction of one by annotation."""
    if FRACTION_ANNOTATION in (pod.get("metadata", {}).get("annotations") or {}):
        return True
    spec = pod.get("spec") or {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = c.get("resources") or {}
        if GPU in (resources.get("requests") or {}) or GPU in (resources.get("limits") or {}):
            return True
    return False


def managed(fake, namespace: str) -> bool:
    ns = fake._store.get(("", "namespaces", "", namespace))
    return ((ns or {}).get("metadata", {}).get("labels") or {}).get(MANAGED_LABEL) == "true"


def admission_policy(fake, pod: dict) -> None:
    """Add the admission gate to a GPU pod created in a managed namespace without a node."""
    spec = pod.setdefault("spec", {})
    if spec.get("nodeName") or not managed(fake, pod["metadata"].get("namespace", "")) or not asks_for_gpus(pod):
        return
    gates = spec.setdefault("schedulingGates", [])
    if not any(g.get("name") == GATE for g in gates):
        gates.append({"name": GATE})
