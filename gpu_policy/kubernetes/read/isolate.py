"""One object that cannot be read never stops planning for the others (docs/kubernetes.md).

Pods and nodes are read one at a time: an object whose fields have the wrong JSON type
(`shape.py`) or break the contract (a `ClusterObjectError` from its reader) is left out
with an `ObjectWarning`, and so is a pod whose demand no node could ever meet (2,000 GPUs,
10^7 CPUs, 2 EiB of memory: beyond what a scenario may describe): it waits, and every other
pod is still planned. The warnings
are structured (object, field, value, message) so that a controller can write them as
Events on the object; their `line()` is what the commands print.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from gpu_policy.model.fields import MAX_CPU, MAX_GPUS_PER_NODE, MAX_MEMORY, show
from gpu_policy.errors import ClusterObjectError, one_line
from gpu_policy.kubernetes.read.nodes import NodeView
from gpu_policy.kubernetes.read.pods import PodView
from gpu_policy.kubernetes.read.shape import shape_problem

View = TypeVar("View")
LEFT_OUT = "left out of planning, which goes on for everything else"
WAITS = "it waits, and planning goes on for everything else"


@dataclass(frozen=True)
class ObjectWarning:
    """Why one object is not planned: `object` is e.g. ``pod ml/train-0`` or ``node n7``, and
    `pod` the (namespace, name) of a pod that has both (None for anything else), so that the
    controller can tell the pod why without reading the text back."""

    object: str
    field: str
    value: str  # as messages show it (bounded)
    message: str  # what the field must be, or why it cannot be met
    outcome: str  # what gpu-policy does about it
    pod: tuple[str, str] | None = None

    def line(self) -> str:
        got = f", got {self.value}" if self.value else ""
        return one_line(f"{self.object}: {self.field}: {self.message}{got}: {self.outcome}", 500)


def read_each(raw: list[Any], kind: str, schema: dict, read: Callable[[dict], View]) -> tuple[list[View],
                                                                                          list[ObjectWarning]]:
    """`read` applied to every object that has the schema's types; the others are warnings."""
    views, warnings = [], []
    for i, obj in enumerate(raw):
        got = read_one(obj, kind, schema, read, i)
        (warnings if isinstance(got, ObjectWarning) else views).append(got)
    return views, warnings


def read_one(obj: Any, kind: str, schema: dict, read: Callable[[dict], View], index: int = 0) -> View | ObjectWarning:
    """`read(obj)` when the object has the schema's types and reads; else the warning that
    leaves it out (`index`: its place in a LIST, for an object without a name)."""
    name, pod = _name_of(obj, kind, index)
    found = shape_problem(obj, schema) if isinstance(obj, dict) else ("", obj, "an object")
    if found:
        field, value, must = found
        return ObjectWarning(name, field or "(the object)", show(value), f"must be {must}", LEFT_OUT, pod)
    try:
        return read(obj)
    except ClusterObjectError as e:
        message, got, value = e.problem.rpartition(", got ")
        return ObjectWarning(name, e.field, value if got else "", message if got else e.problem, LEFT_OUT, pod)


def largest_offers(nodes: list[NodeView]) -> dict[str, float]:
    """What the largest node offers of GPUs (a composable node: its most), CPUs and GiB of
    memory: what a pod asking more than any node may ever hold is told (`beyond_bounds`)."""
    return {"gpus": max((max(n.gpus, n.max_gpus or 0) for n in nodes), default=0),
            "cpu": max((n.cpu or 0 for n in nodes), default=0),
            "memory_gib": max((n.memory_gib or 0 for n in nodes), default=0)}


_BOUNDS = {"gpus": MAX_GPUS_PER_NODE, "cpu": MAX_CPU, "memory_gib": MAX_MEMORY}
_UNITS = {"gpus": "GPUs", "cpu": "CPUs", "memory_gib": "GiB"}


def beyond_bounds(pod: PodView, most: dict[str, float], gpu_resource: str) -> ObjectWarning | None:
    """Why a GPU pod waits when it asks more than any node may ever hold (the scenario's bounds:
    1,024 GPUs, 10^6 CPUs, 10^9 GiB per node), naming the request and the largest node's offer
    (`most`, `largest_offers`); None for a pod a scenario can describe. A pod within the bounds
    that no node of this cluster fits is planned: the plan says why it waits, as for a scenario file."""
    too_much = next((k for k, most_of in _BOUNDS.items() if getattr(pod, k) is not None and getattr(pod, k) > most_of),
                    None)
    if too_much is None or not pod.asks_for_gpus:
        return None
    field = {"gpus": gpu_resource, "cpu": "cpu", "memory_gib": "memory"}[too_much]
    return ObjectWarning(f"pod {pod.full_name}", f"spec.containers[*].resources.requests.{field}",
                         f"{getattr(pod, too_much):,.6g}",
                         f"no node could ever hold it: the largest offers {most[too_much]:,.6g} {_UNITS[too_much]}",
                         WAITS, (pod.namespace, pod.name))


def _name_of(obj: Any, kind: str, index: int) -> tuple[str, tuple[str, str] | None]:
    """How a warning names the object, and (namespace, name) if it is a pod with both."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return f"{kind} items[{index}]", None
    if not isinstance(namespace, str) or not namespace:
        return f"{kind} {name}", None
    return f"{kind} {namespace}/{name}", (namespace, name) if kind == "pod" else None
