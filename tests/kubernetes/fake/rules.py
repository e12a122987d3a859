"""The API server's own validation of the objects the fake takes: pods' scheduling gates
(KEP-3521) and mutable scheduling directives (KEP-3838), and events.k8s.io/v1 Events.
Each rule answers a 422 Status with the real server's shape, or None."""

from __future__ import annotations

import copy

from .server import Resource
from .status import invalid

#: pod spec fields an update may change (the rest are immutable once created)
_MUTABLE_SPEC = ("schedulingGates", "nodeSelector", "activeDeadlineSeconds", "tolerations",
                 "terminationGracePeriodSeconds")
_IMMUTABLE_MESSAGE = ("Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                      "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
                      "to existing tolerations),`spec.terminationGracePeriodSeconds`,`spec.schedulingGates` (only "
                      "deletions),`spec.nodeSelector` (only additions while the pod is gated)")
NOTE_LIMIT = 1024


def on_create(res: Resource, obj: dict):
    if (res.group, res.plural) == ("", "pods"):
        return _pod_create(obj)
    if (res.group, res.plural) == ("events.k8s.io", "events"):
        return _event(obj)
    return None


def on_update(res: Resource, old: dict, new: dict):
    if (res.group, res.plural) == ("", "pods"):
        return _pod_update(old, new)
    if (res.group, res.plural) == ("events.k8s.io", "events"):
        return _event(new)
    return None


def _gate_names(pod: dict) -> list[str]:
    return [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]


def _pod_create(pod: dict):
    name, causes = pod["metadata"]["name"], []
    gates = _gate_names(pod)
    for i, gate in enumerate(gates):
        if gate in gates[:i]:
            causes.append((f"spec.schedulingGates[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{gate}"'))
    if gates and (pod.get("spec") or {}).get("nodeName"):
        causes.append(("spec.nodeName", "FieldValueForbidden",
                       "Forbidden: cannot be set until all schedulingGates have been cleared"))
    return invalid("Pod", name, causes) if causes else None


def _pod_update(old: dict, new: dict):
    name, causes = old["metadata"]["name"], []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_gates, new_gates = _gate_names(old), _gate_names(new)
    for gate in new_gates:
        if gate not in old_gates:
            causes.append(("spec.schedulingGates", "FieldValueForbidden",
                           f"Forbidden: only deletion is allowed, but found new scheduling gate '{gate}'"))
    old_selector, new_selector = old_spec.get("nodeSelector") or {}, new_spec.get("nodeSelector") or {}
    if old_selector != new_selector:
        kept = all(new_selector.get(k) == v for k, v in old_selector.items())
        if not old_gates:
            causes.append(("spec", "FieldValueForbidden", _IMMUTABLE_MESSAGE))
        elif not kept:
            causes.append(("spec.nodeSelector", "FieldValueInvalid",
                           f"Invalid value: {new_selector!r}: only additions to spec.nodeSelector are allowed "
                           "(no mutations or deletions)"))
    old_tolerations, new_tolerations = old_spec.get("tolerations") or [], new_spec.get("tolerations") or []
    if new_tolerations[:len(old_tolerations)] != old_tolerations:
        causes.append(("spec.tolerations", "FieldValueForbidden", "Forbidden: existing toleration can not be modified "
                                                                   "except its tolerationSeconds"))
    if _rest_of_spec(old_spec) != _rest_of_spec(new_spec):
        causes.append(("spec", "FieldValueForbidden", _IMMUTABLE_MESSAGE))
    return invalid("Pod", name, causes) if causes else None


def _rest_of_spec(spec: dict) -> dict:
    """The spec without what an update may change (fields and container images)."""
    rest = {k: v for k, v in spec.items() if k not in _MUTABLE_SPEC}
    for kind in ("containers", "initContainers"):
        if kind in rest:
            rest[kind] = [{k: v for k, v in c.items() if k != "image"} for c in copy.deepcopy(rest[kind])]
    return rest


def _event(event: dict):
    """events.k8s.io/v1 validation: the fields a v1 Event must carry and the note's size."""
    name, causes = event["metadata"]["name"], []
    for path in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not event.get(path):
            causes.append((path, "FieldValueRequired", "Required value"))
    for path in ("action", "reason", "reportingInstance"):
        if len(event.get(path) or "") > 128:
            causes.append((path, "FieldValueTooLong", "Too long: may not be more than 128 bytes"))
    if len((event.get("note") or "").encode()) > NOTE_LIMIT:
        causes.append(("note", "FieldValueTooLong", f"Too long: may not be more than {NOTE_LIMIT} bytes"))
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(("type", "FieldValueNotSupported", 'Unsupported value: supported values: "Normal", "Warning"'))
    regarding_ns = (event.get("regarding") or {}).get("namespace")
    if regarding_ns and regarding_ns != event["metadata"].get("namespace"):
        causes.append(("regarding.namespace", "FieldValueInvalid", "Invalid value: does not match event.namespace"))
    series = event.get("series")
    if series is not None and (int(series.get("count") or 0) < 2 or not series.get("lastObservedTime")):
        causes.append(("series", "FieldValueInvalid", "Invalid value: count must be >= 2 and lastObservedTime set"))
    return invalid("Event", name, causes, group="events.k8s.io") if causes else None
