"""What the cluster's admission does to a pod at CREATE: the MutatingAdmissionPolicy that
deploy/ ships (or the webhook of deploy/webhook/), played by the fake when `gate_gpu_pods` is
on, with the rule's one home in the code (gpu_policy.kubernetes.write.gate)."""

from __future__ import annotations

from gpu_policy.kubernetes.names import ADMISSION_GATE
from gpu_policy.kubernetes.write.gate import gate_patch, gates_at_create, managed_namespace, pod_model

from .patch import json_patch

GATE = ADMISSION_GATE


def admission_policy(fake, pod: dict) -> dict:
    """The pod with the admission gate added when it is a GPU pod created in a managed
    namespace without a node; else the pod unchanged."""
    namespace = fake._store.get(("", "namespaces", "", pod["metadata"].get("namespace", "")))
    if not managed_namespace(namespace):
        return pod
    model = pod_model(pod)
    return json_patch(pod, gate_patch(model)) if gates_at_create(model) else pod
