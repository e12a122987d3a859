"""Which pods get the admission gate at CREATE, and the JSON patch that adds it: the one home
of the rule that deploy/'s MutatingAdmissionPolicy writes in CEL (spec "Admission", "Settled
details"). The admission webhook (gpu_policy.controller.webhook) and the tests' fake API
server both gate with these functions; a test evaluates the policy's CEL on the same pods
and checks that it decides alike.

A pod is read as the `kubernetes` client's `V1Pod` (`pod_model`), as an AdmissionReview's
object is what the API server decoded: typed, its quantities text.
"""

from __future__ import annotations

import json

from gpu_policy.kubernetes.names import ADMISSION_GATE, FRACTION_ANNOTATION, MANAGED_NAMESPACE_LABEL
from gpu_policy.kubernetes.read.shape import POD, shape_problem
from gpu_policy.kubernetes.transport.models import to_model


def pod_model(obj):
    """`obj` (a pod's JSON) as the client's V1Pod. ValueError naming the field when a field the
    gate reads has the wrong JSON type (the client would take it as text), or when the client
    cannot read it as a pod (a required field missing, a list where an object belongs)."""
    if not isinstance(obj, dict):
        raise ValueError("must be an object (a pod)")
    found = shape_problem(obj, POD)
    if found:
        path, value, want = found
        raise ValueError(f"{path}: must be {want}, got {json.dumps(value)[:60]}")
    return to_model(obj, "V1Pod")


def managed_namespace(namespace: dict | None) -> bool:
    """Whether the namespace (its JSON) is labelled `gpu-policy.io/managed: "true"`."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_NAMESPACE_LABEL) == "true"


def _asks(container, gpu_resource: str) -> bool:
    """The container asks for the GPU resource, in requests or limits, a quantity other than 0
    (the policy compares the quantity's text with '0', as the API server writes it)."""
    resources = container.resources
    if resources is None:
        return False
    return any(gpu_resource in (amounts or {}) and str(amounts[gpu_resource]) != "0"
               for amounts in (resources.requests, resources.limits))


def gates_at_create(pod, gpu_resource: str = "nvidia.com/gpu") -> bool:
    """Whether a pod created in a managed namespace gets the gate: not created bound to a node,
    and some container or init container asks for GPUs, or it asks for a fraction of one."""
    spec = pod.spec
    if spec is None or spec.node_name:
        return False
    if any(_asks(c, gpu_resource) for c in (spec.containers or []) + (spec.init_containers or [])):
        return True
    return FRACTION_ANNOTATION in ((pod.metadata and pod.metadata.annotations) or {})


def gate_patch(pod) -> list[dict]:
    """The JSON patch (RFC 6902) that adds our gate and keeps every other controller's; empty
    when the pod carries it already (a pipeline step sets it itself)."""
    gates = pod.spec.scheduling_gates
    if gates is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": ADMISSION_GATE}]}]
    if any(g.name == ADMISSION_GATE for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": ADMISSION_GATE}}]
