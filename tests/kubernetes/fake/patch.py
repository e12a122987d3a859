"""The three PATCH bodies the API server takes: JSON merge patch (RFC 7386), strategic merge
patch (what the official client sends for a dict body) and JSON patch (RFC 6902, a list)."""

from __future__ import annotations

import copy

#: lists that strategic merge combines item by item, by this key (the rest are replaced whole),
#: as the core types' `patchMergeKey` tags say
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
              "env": "name", "volumeMounts": "mountPath", "ports": "containerPort", "conditions": "type",
              "schedulingGates": "name", "ownerReferences": "uid", "imagePullSecrets": "name"}
#: lists of plain values that strategic merge unites
MERGED_VALUES = {"finalizers"}


class PatchError(ValueError):
    """A patch that cannot be applied; `test_failed` when an RFC 6902 `test` did not hold."""

    def __init__(self, message: str, test_failed: bool = False):
        super().__init__(message)
        self.test_failed = test_failed


def merge(target, patch):
    """JSON merge patch (RFC 7386): null deletes, mappings merge, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge(target.get(k), v)
    return target


def strategic_merge(target, patch):
    """Strategic merge as far as the clients here use it: a merge patch whose keyed lists
    (MERGE_KEYS) merge by key, whose `$patch: delete` items go, and whose other `$` directives
    (`$setElementOrder/...`, `$retainKeys`) are read as no-ops."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            target.pop(k, None)
        elif k in MERGE_KEYS and isinstance(v, list) and isinstance(target.get(k), list):
            target[k] = _merge_keyed(target[k], v, MERGE_KEYS[k])
        elif k in MERGED_VALUES and isinstance(v, list) and isinstance(target.get(k), list):
            target[k] = target[k] + [x for x in v if x not in target[k]]
        elif isinstance(v, dict):
            target[k] = strategic_merge(target.get(k), v)
        else:
            target[k] = copy.deepcopy(v)
    return target


def _merge_keyed(current: list, patch: list, key: str) -> list:
    out = [copy.deepcopy(x) for x in current]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
        at = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            out.append(strategic_merge({}, item))
        else:
            out[at] = strategic_merge(out[at], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts: list[str], path: str):
    node = doc
    for p in parts[:-1]:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return node


def _index(container: list, part: str, path: str, adding: bool) -> int:
    if adding and part == "-":
        return len(container)
    if not part.isdigit() or int(part) > len(container) - (0 if adding else 1):
        raise PatchError(f"unable to access invalid index: {part!r} in {path!r}")
    return int(part)


def _get(doc, path: str):
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, adding=False)]
    raise PatchError(f"doc is missing path: {path!r}")


def _add(doc, path: str, value):
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, adding=True), copy.deepcopy(value))
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def _remove(doc, path: str):
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, path, adding=False)]
    else:
        raise PatchError(f"remove operation does not apply: doc is missing path: {path!r}")
    return doc


def json_patch(doc, operations) -> dict:
    """Apply RFC 6902 operations in order to a copy of `doc`; PatchError on the first that fails."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}: needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} operation on {path!r} has no 'value'")
        if kind == "add":
            doc = _add(doc, path, op["value"])
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # the target must exist
            doc = _add(_remove(doc, path), path, op["value"]) if _pointer(path) else copy.deepcopy(op["value"])
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"testing value {path} failed: test failed", test_failed=True)
        elif kind in ("move", "copy"):
            value = _get(doc, op.get("from", ""))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        else:
            raise PatchError(f"unexpected operation {kind!r}")
    return doc
