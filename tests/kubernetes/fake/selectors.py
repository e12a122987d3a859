"""Field and label selectors as the API server applies them to LIST and WATCH."""

from __future__ import annotations

import re


def flag(query: dict, name: str) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it (old clients send "True")."""
    return query.get(name) in ("1", "t", "T", "true", "TRUE", "True")


def field(obj: dict, path: str) -> str:
    """The value at a dotted field path ("status.phase"), "" when absent."""
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def fields_match(obj: dict, selector: str) -> bool:
    """`a=b`, `a==b`, `a!=b`, comma-separated, all must hold."""
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if field(obj, k) == v:
                return False
        else:
            k, v = term.replace("==", "=").split("=", 1)
            if field(obj, k) != v:
                return False
    return True


_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _terms(selector: str) -> list[str]:
    """Split on the commas that are not inside a set's parentheses."""
    terms, depth, start = [], 0, 0
    for i, c in enumerate(selector):
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [t.strip() for t in terms if t.strip()]


def labels_match(obj: dict, selector: str) -> bool:
    """Equality (`=`, `==`, `!=`), existence (`key`, `!key`) and set (`in`, `notin`) terms."""
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in _terms(selector):
        in_set = _SET_TERM.match(term)
        if in_set:
            key, op, values = in_set.group(1), in_set.group(2), {v.strip() for v in in_set.group(3).split(",")}
            if (op == "in") != (key in labels and labels[key] in values):
                return False
        elif "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def selected(obj: dict | None, namespace: str, query: dict) -> bool:
    """Whether a LIST or WATCH with this namespace ("" for all) and query would show the object."""
    if obj is None:
        return False
    if namespace and obj.get("metadata", {}).get("namespace") != namespace:
        return False
    return fields_match(obj, query.get("fieldSelector", "")) and labels_match(obj, query.get("labelSelector", ""))
