"""A stand-in kube-scheduler that tests drive: `schedule_once()` binds every ungated, unbound pod
that is not being deleted, as kube-scheduler's default plugins would.

Filters: nodeSelector (a node without a `kubernetes.io/hostname` label has its name there, as
the kubelet sets it), required node affinity (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`,
`Lt`; `matchFields` on `metadata.name`), NoSchedule/NoExecute taints against tolerations, an
unschedulable node, and room for the pod's requests (`nvidia.com/gpu`, `cpu`, `memory`, `pods`)
next to the pods bound there. Score: least allocated first (spreading), ties by node name.
Order: priority, then oldest first (or newest first, as real clusters show under load).
A pod that fits nowhere stays Pending; `unschedulable` says why, like FailedScheduling.
"""

from __future__ import annotations

import re

HOSTNAME = "kubernetes.io/hostname"
_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
SCORED = ("cpu", "memory", "nvidia.com/gpu")


def quantity(text) -> float:
    """A Kubernetes quantity ("500m", "16Gi", "2") as a number."""
    match = _QUANTITY.match(str(text).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {text!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def pod_requests(pod: dict) -> dict[str, float]:
    """What the pod asks of a node: the larger of its containers' sum and any init container,
    a limit standing for a missing request (as the API server defaults it), plus one `pods`."""
    spec = pod.get("spec") or {}

    def asked(container: dict) -> dict[str, float]:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {k: quantity(v) for k, v in merged.items()}

    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in asked(c).items():
            total[k] = total.get(k, 0.0) + v
    for c in spec.get("initContainers") or []:
        for k, v in asked(c).items():
            total[k] = max(total.get(k, 0.0), v)
    total["pods"] = 1.0
    return total


def labels_of(node: dict) -> dict[str, str]:
    labels = dict(node.get("metadata", {}).get("labels") or {})
    labels.setdefault(HOSTNAME, node["metadata"]["name"])
    return labels


def _expression_holds(expr: dict, value: str | None) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            number, bound = int(value), int(values[0])
        except (TypeError, ValueError, IndexError):
            return False
        return number > bound if op == "Gt" else number < bound
    return False


def affinity_holds(pod: dict, node: dict) -> bool:
    """Required node affinity: any term holds, a term holding when all its expressions do."""
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}) \
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    labels, fields = labels_of(node), {"metadata.name": node["metadata"]["name"]}
    return any(all(_expression_holds(e, labels.get(e.get("key"))) for e in term.get("matchExpressions") or [])
               and all(_expression_holds(e, fields.get(e.get("key"))) for e in term.get("matchFields") or [])
               and (term.get("matchExpressions") or term.get("matchFields"))
               for term in required.get("nodeSelectorTerms") or [])


def tolerated(taint: dict, tolerations: list[dict]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def why_not(pod: dict, node: dict, free: dict[str, float]) -> str | None:
    """Why the pod cannot go on the node (a FailedScheduling-like phrase), or None when it can."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not tolerated(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}, tolerations):
        return "node(s) were unschedulable"
    labels = labels_of(node)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()) or not affinity_holds(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerated(taint, tolerations):
            return "node(s) had untolerated taint {%s: %s}" % (taint.get("key"), taint.get("value", ""))
    for resource, amount in pod_requests(pod).items():
        if amount > 0 and amount > free.get(resource, 0.0) + 1e-9:
            return f"Insufficient {resource}"
    return None


class FakeScheduler:
    """Binds pods on the fake API server when a test says so; `newest_first` takes the newest
    pending pod first (what real clusters show under load) instead of the oldest."""

    def __init__(self, api, newest_first: bool = False):
        self.api = api
        self.newest_first = newest_first
        self.unschedulable: dict[str, str] = {}  # "namespace/name" -> why it waits (the last try)
        self.bound: list[tuple[str, str, str]] = []  # (namespace, name, node) in binding order

    def schedule_once(self) -> list[tuple[str, str, str]]:
        """One pass over the pending pods; returns the (namespace, name, node) bound in it."""
        with self.api._lock:
            nodes = self.api.objects("nodes")
            pods = self.api.objects("pods")
            free = {n["metadata"]["name"]: self._allocatable(n) for n in nodes}
            for p in pods:
                node = (p.get("spec") or {}).get("nodeName")
                if node in free and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    for k, v in pod_requests(p).items():
                        free[node][k] = free[node].get(k, 0.0) - v
            pending = [p for p in pods if self._pending(p)]
            pending.sort(key=self._order)
            done = []
            self.unschedulable.clear()
            for p in pending:
                meta = p["metadata"]
                reasons, best = {}, None
                for n in nodes:
                    name = n["metadata"]["name"]
                    reason = why_not(p, n, free[name])
                    if reason:
                        reasons[reason] = reasons.get(reason, 0) + 1
                    elif best is None or self._score(n, free[name], p) > best[0]:
                        best = (self._score(n, free[name], p), n)
                if best is None:
                    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
                    self.unschedulable[f"{meta['namespace']}/{meta['name']}"] = \
                        f"0/{len(nodes)} nodes are available: {detail}."
                    continue
                target = best[1]["metadata"]["name"]
                for k, v in pod_requests(p).items():
                    free[target][k] = free[target].get(k, 0.0) - v
                self.api.bind(meta["namespace"], meta["name"], target)
                done.append((meta["namespace"], meta["name"], target))
            self.bound.extend(done)
            return done

    @staticmethod
    def _allocatable(node: dict) -> dict[str, float]:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        out = {k: quantity(v) for k, v in allocatable.items()}
        out.setdefault("pods", 110.0)
        return out

    @staticmethod
    def _pending(pod: dict) -> bool:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        return (not spec.get("nodeName") and not spec.get("schedulingGates") and not meta.get("deletionTimestamp")
                and (pod.get("status") or {}).get("phase", "Pending") == "Pending")

    def _order(self, pod: dict):
        key = ("", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        created = self.api.creation_order.get(key, 0)
        return -int((pod.get("spec") or {}).get("priority") or 0), -created if self.newest_first else created

    def _score(self, node: dict, free: dict[str, float], pod: dict) -> tuple[float, str]:
        """LeastAllocated: the mean share of each scored resource left free after placing the pod;
        ties go to the first node by name."""
        allocatable = self._allocatable(node)
        asked = pod_requests(pod)
        shares = [(free.get(r, 0.0) - asked.get(r, 0.0)) / allocatable[r] for r in SCORED if allocatable.get(r)]
        return (sum(shares) / len(shares) if shares else 0.0), _reverse(node["metadata"]["name"])


def _reverse(name: str) -> str:
    """A key that sorts names backwards, so that `max` prefers the first name."""
    return "".join(chr(0x10FFFF - ord(c)) for c in name)

