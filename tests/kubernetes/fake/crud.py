"""GET, LIST (paginated), POST, PUT, PATCH, DELETE and pods/eviction on the store (under its lock)."""

from __future__ import annotations

import base64
import copy
import json
import time
import uuid

from . import pods, rules
from .patch import PatchError, json_patch, merge, strategic_merge
from .selectors import selected
from .server import FakeKubernetes, Resource, now_rfc3339
from .status import REASONS, status


def handle(fake: FakeKubernetes, method: str, query: dict, body, route, content_type: str):
    res, namespace, name, sub = route
    key = (res.group, res.plural, namespace, name)
    if sub:
        if res.plural == "pods" and sub == "eviction" and method == "POST":
            return _evict(fake, namespace, name, body)
        if not (sub == "status" and res.status and method in ("GET", "PUT", "PATCH")):
            return status(404, "NotFound", f"no subresource {sub}")
    if not name:
        if method == "GET":
            return _list(fake, res, namespace, query)
        if method == "POST":
            return _create(fake, res, namespace, body)
        return status(405, "MethodNotAllowed", f"{method} on a collection")
    current = fake._store.get(key)
    if current is None:
        return status(404, "NotFound", f'{res.plural} "{name}" not found')
    if method == "GET":
        return 200, current, {}
    if method == "DELETE" and not sub:
        if current["metadata"].get("finalizers"):  # gone once its controllers have removed them
            if not current["metadata"].get("deletionTimestamp"):
                marked = copy.deepcopy(current)
                marked["metadata"]["deletionTimestamp"] = now_rfc3339()
                fake._write(res, key, marked)
            return 200, fake._store[key], {}
        fake._remove(key)
        if res.plural == "pods":  # a pod not running anywhere goes at once; the answer is its last state
            return 200, {**current, "metadata": {**current["metadata"], "resourceVersion": str(fake._version)}}, {}
        return status(200, "", "deleted", {"name": name, "kind": res.plural, "uid": current["metadata"]["uid"]})
    if method == "PUT":
        new = copy.deepcopy(body)
        new["metadata"] = {**new.get("metadata", {}), "uid": current["metadata"]["uid"],
                           "creationTimestamp": current["metadata"]["creationTimestamp"]}
    elif method == "PATCH":
        try:
            new = _patched(current, body, content_type)
        except PatchError as e:
            if e.test_failed or "json-patch" in content_type:
                return status(422, "Invalid", "the server rejected our request due to an error in our request",
                              {"causes": [{"reason": "UnexpectedServerResponse", "message": str(e)}]})
            return status(400, "BadRequest", str(e))
        if res.plural == "pods":
            fake.patches.append((namespace, name, body))
    else:
        return status(405, "MethodNotAllowed", method)
    sent_rv = ((new if method == "PATCH" else body or {}).get("metadata") or {}).get("resourceVersion")
    if res.status:  # the status subresource: the object's writes keep its status, /status's change only it
        new = _split_status(current, new, to_status=bool(sub))
    if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
        return status(409, "Conflict", f'Operation cannot be fulfilled on {res.plural} "{name}": the object has been '
                                        "modified; please apply your changes to the latest version and try again")
    new.setdefault("metadata", {}).update(name=name, **({"namespace": namespace} if namespace else {}))
    refused = rules.on_update(res, current, new) or _admit(fake, res, method, new)
    if refused:
        return refused
    stored = fake._write(res, key, new)
    if res.plural == "pods" and method == "PATCH" and fake.on_pod_patch is not None:
        fake.on_pod_patch(namespace, name, body)
    return 200, stored, {}


def _split_status(current: dict, new: dict, to_status: bool) -> dict:
    """`new` with `current`'s status, or (`to_status`) `current` with `new`'s status."""
    base, status_from = (current, new) if to_status else (new, current)
    out = {k: copy.deepcopy(v) for k, v in base.items() if k != "status"}
    if "status" in status_from:
        out["status"] = copy.deepcopy(status_from["status"])
    return out


def _patched(current: dict, body, content_type: str) -> dict:
    if "json-patch" in content_type:
        return json_patch(current, body)
    if "strategic-merge-patch" in content_type:
        return strategic_merge(copy.deepcopy(current), body or {})
    return merge(copy.deepcopy(current), body or {})


def _admit(fake: FakeKubernetes, res: Resource, method: str, obj: dict):
    """A validating webhook's verdict on an object about to be stored: None, or the refusal."""
    webhook = fake.admission.get((res.group, res.plural))
    verdict = webhook(method, obj) if webhook is not None else None
    return status(verdict[0], REASONS.get(verdict[0], "Error"), verdict[1]) if verdict else None


def _create(fake: FakeKubernetes, res: Resource, namespace: str, body: dict):
    if not isinstance(body, dict):
        return status(400, "BadRequest", "the request body is not an object")
    obj = copy.deepcopy(body)
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
    name = meta.get("name")
    if not name:
        return status(422, "Invalid", "metadata.name: Required value")
    key = (res.group, res.plural, namespace, name)
    if key in fake._store:
        return status(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
    meta.pop("resourceVersion", None)
    if res.status:
        obj.pop("status", None)
    if namespace:
        meta["namespace"] = namespace
    if res.plural == "pods" and fake.gate_gpu_pods:
        try:
            obj = pods.admission_policy(fake, obj)
        except ValueError as e:  # a pod the admission cannot read is refused, never let through ungated
            return status(400, "BadRequest", f"admission refused the pod: {e}")
    refused = rules.on_create(res, obj) or _admit(fake, res, "POST", obj)
    if refused:
        return refused
    return 201, fake._write(res, key, obj), {}


def _list(fake: FakeKubernetes, res: Resource, namespace: str, query: dict):
    token = query.get("continue")
    if token:
        try:
            snap_id, offset = json.loads(base64.urlsafe_b64decode(token.encode()))
        except ValueError:
            return status(400, "BadRequest", "continue key is not valid")
        snap = fake._snapshots.get(snap_id)
        if snap is None or (fake.page_ttl_s is not None and time.monotonic() - snap[1] > fake.page_ttl_s):
            fake._snapshots.pop(snap_id, None)
            return status(410, "Expired", "The provided continue parameter is too old to display a consistent list "
                                           "result. You can start a new list without the continue parameter.")
        items, version = snap[0], snap[2]
    else:
        items = [o for (g, p, _, _), o in sorted(fake._store.items())
                 if g == res.group and p == res.plural and selected(o, namespace, query)]
        snap_id, offset, version = uuid.uuid4().hex, 0, fake._version
        fake._snapshots[snap_id] = (items, time.monotonic(), version)
    limit = int(query.get("limit") or 0)
    page = items[offset:offset + limit] if limit else items[offset:]
    meta = {"resourceVersion": str(version)}
    end = offset + len(page)
    if limit and end < len(items):
        meta["continue"] = base64.urlsafe_b64encode(json.dumps([snap_id, end]).encode()).decode()
        meta["remainingItemCount"] = len(items) - end
    else:
        fake._snapshots.pop(snap_id, None)
    return 200, {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": page}, {}


def _evict(fake: FakeKubernetes, namespace: str, name: str, body):
    """The Eviction API: 429 while a disruption budget blocks; else the pod is marked for deletion
    with the grace period the Eviction's deleteOptions give (else its own), as the API server does."""
    key = ("", "pods", namespace, name)
    pod = fake._store.get(key)
    if pod is None:
        return status(404, "NotFound", f'pods "{name}" not found')
    block = fake.blocks.get((namespace, name))
    if block is not None:
        if block.times is not None:
            block.times -= 1
            if block.times <= 0:
                del fake.blocks[(namespace, name)]
        code, body, _ = status(429, "TooManyRequests",
                               "Cannot evict pod as it would violate the pod's disruption budget.",
                               {"causes": [{"reason": "DisruptionBudget",
                                            "message": "The disruption budget gpu-pdb needs 1 healthy pods and has 1 "
                                                       "currently"}]})
        return code, body, ({"Retry-After": f"{block.retry_after:g}"} if block.retry_after is not None else {})
    options = (body.get("deleteOptions") if isinstance(body, dict) else None) or {}
    wanted = (options.get("preconditions") or {}).get("uid")
    if wanted is not None and wanted != pod["metadata"].get("uid"):
        return status(409, "Conflict", f"Precondition failed: UID in precondition: {wanted}, UID in object meta: "
                                       f"{pod['metadata'].get('uid')}")
    if not pod["metadata"].get("deletionTimestamp"):
        pod = copy.deepcopy(pod)  # stored objects are replaced, never changed: list snapshots share them
        pod["metadata"]["deletionTimestamp"] = now_rfc3339()
        grace = options.get("gracePeriodSeconds")
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int) or grace < 0):
            return status(422, "Invalid", f"deleteOptions.gracePeriodSeconds: must be a whole number >= 0, got {grace!r}")
        own = pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        pod["metadata"]["deletionGracePeriodSeconds"] = own if grace is None else grace
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"})
        fake._write(fake.resources[("", "pods")], key, pod)
        fake.evictions.append((namespace, name))
        if fake.on_eviction is not None:
            fake.on_eviction(namespace, name)
    return status(201, "", "evicted")
