"""The JSON types of the fields gpu-policy reads from pods and nodes, checked before reading.

An API server (or a proxy in front of it) may send `labels` as a list, `containers` as a
string or `allocatable` as NaN. `shape_problem` finds the first field whose type is not
what the contract reads, so that the object can be left out with a warning naming the
field instead of raising a TypeError deep in a reader. A schema is a dict (an object with
those keys; ``"*"``: every key), a one-item list (a list of that), or a type or tuple of
types. JSON null is accepted for a field (readers treat it as absent), never as a list item.
"""

from __future__ import annotations

from typing import Any

#: a resource quantity: "500m", "64Gi", or a bare JSON number
QUANTITY = (str, int, float)

_WORDS = {dict: "an object", list: "a list", str: "a string", int: "a whole number", bool: "true or false",
          QUANTITY: "a quantity"}

_CONTAINER = {"resources": {"requests": {"*": QUANTITY}, "limits": {"*": QUANTITY}}}
_REQUIREMENTS = [{"key": str, "operator": str, "values": [str]}]

POD = {
    "metadata": {"name": str, "namespace": str, "uid": str, "labels": {"*": str}, "annotations": {"*": str},
                 "ownerReferences": [{"controller": bool, "name": str, "kind": str, "apiVersion": str}], "creationTimestamp": str,
                 "deletionTimestamp": str},
    "spec": {"nodeName": str, "priority": int, "terminationGracePeriodSeconds": int, "containers": [_CONTAINER], "initContainers": [_CONTAINER],
             "nodeSelector": {"*": str}, "tolerations": [{"key": str, "operator": str, "value": str, "effect": str}],
             "schedulingGates": [{"name": str}],
             "resourceClaims": [{"name": str, "resourceClaimName": str, "resourceClaimTemplateName": str}],
             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                 "nodeSelectorTerms": [{"matchExpressions": _REQUIREMENTS, "matchFields": _REQUIREMENTS}]}}}},
    "status": {"phase": str, "startTime": str, "resourceClaimStatuses": [{"name": str, "resourceClaimName": str}]},
}

NODE = {
    "metadata": {"name": str, "labels": {"*": str}, "annotations": {"*": str}},
    "spec": {"unschedulable": bool, "taints": [{"key": str, "value": str, "effect": str}]},
    "status": {"allocatable": {"*": QUANTITY}, "conditions": [{"type": str, "status": str}]},
}


# Dynamic Resource Allocation (resource.k8s.io/v1) and PodGroups: what dra.py and workloads.py read
_CEL = [{"cel": {"expression": str}}]
_DEVICE_REQUESTS = {"devices": {"requests": [{"exactly": {"deviceClassName": str, "allocationMode": str, "count": int,
                                                          "selectors": _CEL}}]}}
_TAINT = {"key": str, "value": str, "effect": str}
RESOURCE_SLICE = {
    "metadata": {"name": str},
    "spec": {"driver": str, "nodeName": str, "pool": {"name": str, "generation": int, "resourceSliceCount": int},
             "devices": [{"name": str, "attributes": {"*": {"string": str, "int": int, "bool": bool, "version": str}},
                          "consumesCounters": [{"counterSet": str}], "taints": [_TAINT]}]},
}
RESOURCE_CLAIM = {
    "metadata": {"name": str, "namespace": str, "annotations": {"*": str}},
    "spec": {"devices": {"requests": [{"name": str, "exactly": {
        **_DEVICE_REQUESTS["devices"]["requests"][0]["exactly"],
        "tolerations": [{"key": str, "operator": str, "value": str, "effect": str}]}}]}},
    "status": {"allocation": {"devices": {"results": [{"request": str, "driver": str, "pool": str, "device": str}]}},
               "reservedFor": [{"resource": str, "name": str, "uid": str}]},
}
RESOURCE_CLAIM_TEMPLATE = {"metadata": {"name": str, "namespace": str}, "spec": {"spec": _DEVICE_REQUESTS}}
DEVICE_CLASS = {"metadata": {"name": str}, "spec": {"selectors": _CEL}}
DEVICE_TAINT_RULE = {"metadata": {"name": str},
                     "spec": {"deviceSelector": {"driver": str, "pool": str, "device": str}, "taint": _TAINT}}
POD_GROUP = {"metadata": {"name": str, "namespace": str}, "spec": {"minMember": int}}
TRAIN_JOB = {"metadata": {"name": str, "namespace": str}, "spec": {"trainer": {"numNodes": int}}}

def shape_problem(value: Any, schema: Any, path: str = "") -> tuple[str, Any, str] | None:
    """(field path, value, what it must be) of the first field of the wrong type, else None."""
    if value is None:
        return None
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return path, value, _word(schema)
        for key, sub in schema.items():
            items = value.items() if key == "*" else [(key, value.get(key))]
            for name, item in items:
                found = shape_problem(item, sub, f"{path}.{name}" if path else str(name))
                if found:
                    return found
        return None
    if isinstance(schema, list):
        if not isinstance(value, list):
            return path, value, _word(schema)
        for i, item in enumerate(value):
            if item is None:
                return f"{path}[{i}]", None, _word(schema[0])
            found = shape_problem(item, schema[0], f"{path}[{i}]")
            if found:
                return found
        return None
    wrong_bool = isinstance(value, bool) and schema is not bool
    if wrong_bool or not isinstance(value, schema):
        return path, value, _word(schema)
    return None


def _word(schema: Any) -> str:
    """What a schema asks for, in words."""
    return _WORDS[dict] if isinstance(schema, dict) else _WORDS[list] if isinstance(schema, list) else _WORDS[schema]
