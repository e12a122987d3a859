"""Placement constraints read from the cluster: a pod's node selector, required node affinity
and tolerations, and a node's taints, in the scenario's form (docs/kubernetes.md, "Placement
constraints").

Left out, because the snapshot says them another way: the GPU product in a selector or in a
single affinity term (it is the job's `gpu_model`), the GPU taint `nvidia.com/gpu` that GPU
pods tolerate, and the node-lifecycle taints `node.kubernetes.io/*` with the tolerations every
pod gets for them (a cordoned or not-Ready node already takes no new work). A bound pod's
`kubernetes.io/hostname` selector naming its own node is left out too: it is how gpu-policy
releases a pod, and the replacement of a moved pod, made from its controller's template,
does not carry it (read, every running job would be a shape of its own that cannot move).
"""

from __future__ import annotations

from typing import Any, Callable

from gpu_policy.model.fields import JOB_FIELDS, NODE_FIELDS, Invalid
from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.names import GPU_PRODUCT_LABEL, GPU_TAINT_KEY, HOSTNAME_LABEL

_LIFECYCLE = "node.kubernetes.io/"
_AFFINITY = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def _handled_elsewhere(key: str | None) -> bool:
    return key == GPU_TAINT_KEY or (key or "").startswith(_LIFECYCLE)


def _checked(check: Callable[[Any], Any], value: Any, where: str, field: str) -> Any:
    try:
        return check(value)
    except Invalid as e:
        raise ClusterObjectError(where, f"{field}{e.at}", str(e)) from None


def pod_constraints(spec: dict, where: str) -> dict:
    """{node_selector, node_affinity, tolerations} of a pod spec, only those it has."""
    out: dict = {}
    bound = spec.get("nodeName")
    selector = {k: v for k, v in (spec.get("nodeSelector") or {}).items()
                if k != GPU_PRODUCT_LABEL and not (k == HOSTNAME_LABEL and v == bound)}
    if selector:
        out["node_selector"] = _checked(JOB_FIELDS["node_selector"], selector, where, "spec.nodeSelector")
    terms = _affinity_terms(spec)
    if terms:
        out["node_affinity"] = _checked(JOB_FIELDS["node_affinity"], terms, where, _AFFINITY)
    tolerations = [_toleration(t) for t in spec.get("tolerations") or [] if not _handled_elsewhere(t.get("key"))]
    if tolerations:
        out["tolerations"] = _checked(JOB_FIELDS["tolerations"], tolerations, where, "spec.tolerations")
    return out


def _affinity_terms(spec: dict) -> list[dict]:
    """The pod's required node-affinity terms; in a single term, the GPU product `In` is left
    out (it is the job's gpu_model), and the term with it when nothing else is left."""
    terms = [_term(t) for t in ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
                                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
                                .get("nodeSelectorTerms") or [])]
    if len(terms) != 1:
        return terms
    expressions = terms[0].get("match_expressions", [])
    kept = [e for e in expressions if not (e.get("key") == GPU_PRODUCT_LABEL and e.get("operator") == "In")]
    if len(kept) == len(expressions):
        return terms
    term = _without_empty({**terms[0], "match_expressions": kept})
    return [term] if term else []


def _term(term: dict) -> dict:
    return _without_empty({"match_expressions": [_expression(e) for e in term.get("matchExpressions") or []],
                           "match_fields": [_expression(e) for e in term.get("matchFields") or []]})


def _without_empty(term: dict) -> dict:
    return {k: v for k, v in term.items() if v}


def _expression(e: dict) -> dict:
    out = {"key": e.get("key"), "operator": e.get("operator")}
    if e.get("values"):
        out["values"] = e["values"]
    return out


def _toleration(t: dict) -> dict:
    """A toleration without the defaults (operator Equal, empty value and effect) and
    without tolerationSeconds (how long a NoExecute taint is tolerated is not planned)."""
    out = {"key": t.get("key"), "operator": t.get("operator"), "value": t.get("value"), "effect": t.get("effect")}
    return {k: v for k, v in out.items() if v}


def node_taints(spec: dict, where: str) -> list[dict]:
    """The node's NoSchedule and NoExecute taints, but the GPU and node-lifecycle ones."""
    taints = [{k: v for k, v in {"key": t.get("key"), "value": t.get("value"), "effect": t.get("effect")}.items() if v}
              for t in spec.get("taints") or []
              if t.get("effect") in ("NoSchedule", "NoExecute") and not _handled_elsewhere(t.get("key"))]
    return _checked(NODE_FIELDS["taints"], taints, where, "spec.taints")


def selected_labels(job) -> set[str]:
    """Label keys the job's node selector or affinity looks at: the node labels a snapshot keeps."""
    keys = set(job.node_selector)
    for term in job.node_affinity or ():
        keys.update(e["key"] for e in term.get("match_expressions") or ())
    return keys


