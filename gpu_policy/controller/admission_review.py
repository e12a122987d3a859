"""One admission.k8s.io/v1 AdmissionReview in, its answer out: the webhook's decision
(spec "Admission", "Where MutatingAdmissionPolicy is not served").

The pod is read as the `kubernetes` client's V1Pod and judged by the rule's one home
(gpu_policy.kubernetes.write.gate), so the webhook adds the gate to exactly the pods the
MutatingAdmissionPolicy would. A pod in a namespace the controller's cache does not know as
managed is left alone. A review that cannot be read is refused with a message naming the
field, never allowed: an ungated GPU pod is what admission exists to prevent.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Callable

from gpu_policy.errors import InputError
from gpu_policy.kubernetes.transport.models import to_json
from gpu_policy.kubernetes.write.gate import gate_patch, gates_at_create, pod_model
from gpu_policy.model.safe_load import InputLimits, decode, parse_json

API_VERSION = "admission.k8s.io/v1"
#: the largest review read: the API server's own cap on a request body
MAX_REVIEW_BYTES = 3 * 1024 * 1024
_POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}


class Unreadable(ValueError):
    """A review with no uid to answer to: refused with an HTTP error and this message."""


@dataclass(frozen=True)
class Decision:
    """What the webhook answered: `result` is gated, allowed or refused (a metric's label)."""

    result: str
    answer: dict


def decide(body: bytes, managed: Callable[[str], bool | None], gpu_resource: str = "nvidia.com/gpu") -> Decision:
    """The answer to one review. `managed(namespace)`: whether the controller's cache knows
    it as managed, None while the cache has not listed namespaces yet. Unreadable when the
    review has no uid to answer to."""
    request = _request(body)
    uid = request["uid"]
    if request.get("operation") != "CREATE":  # a gate is set only at CREATE (deploy/webhook/ sends no other)
        return Decision("allowed", _answer(uid, []))
    try:
        namespace, pod = _pod(request)
    except ValueError as e:
        return _refuse(uid, 400, f"gpu-policy cannot read this AdmissionReview: {e}")
    known = managed(namespace)
    if known is None:
        return _refuse(uid, 503, "gpu-policy's webhook has not listed the namespaces yet; try again in a moment")
    if known and gates_at_create(pod, gpu_resource):
        patch = gate_patch(pod)
        return Decision("gated", _answer(uid, patch))
    return Decision("allowed", _answer(uid, []))


def _request(body: bytes) -> dict:
    """The review's `request`, with a text uid; Unreadable otherwise."""
    try:
        review = parse_json(decode(body, "the AdmissionReview"), "the AdmissionReview",
                            InputLimits(max_bytes=MAX_REVIEW_BYTES, max_depth=64))
    except (InputError, json.JSONDecodeError) as e:
        raise Unreadable(f"the AdmissionReview is not JSON gpu-policy can read: {str(e)[:160]}") from None
    if not isinstance(review, dict) or review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise Unreadable(f"the body must be an {API_VERSION} AdmissionReview")
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise Unreadable("request.uid: must be the review's uid (text)")
    return request


def _pod(request: dict):
    """(namespace, V1Pod) of a pod CREATE; ValueError naming the field otherwise."""
    if request.get("kind") != _POD_KIND:
        raise ValueError(f"request.kind: must be {_POD_KIND}, got {str(request.get('kind'))[:80]}")
    namespace = request.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise ValueError("request.namespace: must be the pod's namespace (text)")
    try:
        return namespace, pod_model(request.get("object"))
    except ValueError as e:
        raise ValueError(f"request.object: {e}") from None


def _answer(uid: str, patch: list[dict]) -> dict:
    response = {"uid": uid, "allowed": True}
    if patch:
        response.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(patch).encode()).decode())
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def _refuse(uid: str, code: int, message: str) -> Decision:
    """A refusal the API server shows its caller (`status`: the client's V1Status, as JSON)."""
    from kubernetes.client import V1Status

    status = to_json(V1Status(code=code, message=message, status="Failure"))
    response = {"uid": uid, "allowed": False, "status": status}
    return Decision("refused", {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response})
