"""The cluster's network hierarchy, and what each pod asks of it (docs/kubernetes.md, "Topology").

The levels are the queues ConfigMap's ``topology.yaml`` (read with the queues), else those of a
Kueue `Topology` object (`spec.levels[].nodeLabel`, widest first, each level named by its label):
the one `--topology` names, else the only one, else the one the pods name in KAI's
``kai.scheduler/topology``. A one-shot look LISTs Kueue's Topologies only when they are used: the
ConfigMap gives no levels, and `--topology` names one or some GPU pod carries a topology annotation
(the controller watches them, and its look follows the same rule, so both see the same scenario).

A pod's levels (`with_topology`) are names or labels of those levels, mapped to the level's name.
One that is no level, a preferred level not narrower than the required one, or a Topology named
in ``kai.scheduler/topology`` other than the one in use, is an error on that pod: a pod waiting at
gpu-policy's gate is left out (`ObjectWarning`: the controller says so in the Warning Event
`GpuPolicyNotAdmitted`), every other pod (bound, released, or not gpu-policy's to admit) is
planned without the request, with a warning, since leaving it out would hide the GPUs it holds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from gpu_policy.errors import ClusterObjectError, ScenarioError
from gpu_policy.kubernetes.names import KAI_TOPOLOGY_ANNOTATION
from gpu_policy.kubernetes.read.isolate import LEFT_OUT, ObjectWarning
from gpu_policy.kubernetes.read.pods import PodView
from gpu_policy.kubernetes.read.shape import shape_problem
from gpu_policy.model import JobTopology, TopologyLevel
from gpu_policy.model.fields import show
from gpu_policy.model.scenario_file import parse_scenario

#: the fields of a Kueue Topology gpu-policy reads (v1beta1 and v1beta2 have the same)
KUEUE_TOPOLOGY = {"metadata": {"name": str}, "spec": {"levels": [{"nodeLabel": str}]}}
#: what becomes of a pod whose request cannot be read, when it is not waiting at gpu-policy's gate
PLANNED_WITHOUT = "planned without its topology request (it is not waiting at gpu-policy's gate)"


@dataclass(frozen=True)
class Hierarchy:
    """The levels a look places by, where they come from (in messages), and the Kueue Topology
    they are (None: the ConfigMap's, or none)."""

    levels: list[TopologyLevel]
    source: str
    kueue: str | None = None


def asks_for_topology(pod: PodView) -> bool:
    """Whether the pod is a GPU pod with a topology annotation (then Kueue's Topologies are used)."""
    return pod.topology_ask is not None and pod.asks_for_gpus and not pod.deleting


def named_topology(pod: PodView) -> str | None:
    """The Topology a GPU pod names in `kai.scheduler/topology`, if any."""
    return pod.topology_ask.named if pod.topology_ask is not None and pod.asks_for_gpus else None


def hierarchy(config_levels: list[TopologyLevel] | None, config_where: str,
              list_kueue: Callable[[], list[dict] | None], wanted: str | None,
              asked: bool, named: set[str]) -> tuple[Hierarchy, list[str]]:
    """The levels of this look and the warnings of choosing them: the ConfigMap's when it has
    ``topology.yaml``, else a Kueue Topology's when one is used (`wanted`: the one --topology
    names; a name no Topology has is an error naming it). `asked`: whether some pod
    `asks_for_topology`; `named`: the Topologies the pods name (`named_topology`)."""
    if config_levels is not None:
        return Hierarchy(config_levels, f"{config_where}: data.topology.yaml"), []
    if wanted is None and not asked:
        return Hierarchy([], "the cluster (no topology.yaml, and no GPU pod asks for a topology)"), []
    by_name = {o["metadata"]["name"]: o for o in list_kueue() or []
               if isinstance(o, dict) and isinstance(o.get("metadata"), dict)
               and isinstance(o["metadata"].get("name"), str)}
    named = named & by_name.keys()
    if wanted is not None and wanted not in by_name:
        have = ", ".join(sorted(by_name)) or "none"
        raise ClusterObjectError(f"Topology {wanted}", "", f"does not exist (--topology names it); the cluster's "
                                                           f"Kueue Topologies: {have}")
    chosen = wanted or _only(by_name.keys()) or _only(named)
    if chosen is None:
        if not by_name:
            return Hierarchy([], "the cluster (no topology.yaml in the queues ConfigMap, no Kueue Topology)"), []
        return Hierarchy([], "the cluster (no Kueue Topology chosen)"), [
            f"{len(by_name)} Kueue Topologies ({', '.join(sorted(by_name))}), and neither --topology nor the pods' "
            f"{KAI_TOPOLOGY_ANNOTATION} choose one: no topology levels (name one with --topology)"]
    return Hierarchy(levels_from_kueue(by_name[chosen]), f"Kueue Topology {chosen}", chosen), []


def _only(names) -> str | None:
    return next(iter(names)) if len(names) == 1 else None


def levels_from_kueue(obj: dict) -> list[TopologyLevel]:
    """A Kueue Topology's levels, widest first, each named by its node label; a field gpu-policy
    cannot read is an error naming the object and the field."""
    where = f"Topology {obj['metadata']['name']}"
    found = shape_problem(obj, KUEUE_TOPOLOGY)
    if found:
        field, value, must = found
        raise ClusterObjectError(where, field, f"must be {must}, got {show(value)}")
    levels = (obj.get("spec") or {}).get("levels") or []
    if not levels or not all(level.get("nodeLabel") for level in levels):
        raise ClusterObjectError(where, "spec.levels", "must list 1 to 16 levels, each with a nodeLabel")
    try:
        return parse_scenario({"topology": [{"name": level["nodeLabel"], "label": level["nodeLabel"]}
                                            for level in levels]}, where).topology
    except ScenarioError as e:  # topology[i].label -> spec.levels[i].nodeLabel
        at = e.field.removeprefix("topology").split(".")[0]  # "[i]", or "" for the whole list
        raise ClusterObjectError(where, f"spec.levels{at}" + (".nodeLabel" if at else ""), e.problem) from None


def with_topology(pod: PodView, h: Hierarchy) -> tuple[PodView | None, ObjectWarning | None, str | None]:
    """The pod with its request read against the levels; None and the warning when it is left
    out (a gated pod whose request is an error); or the pod and the warning line of a pod
    planned without its request."""
    ask = pod.topology_ask
    if ask is None or not pod.asks_for_gpus or pod.deleting or (ask.required, ask.preferred) == (None, None):
        return pod, None, None
    got = _levels(pod, h)
    if isinstance(got, JobTopology):
        return dataclasses.replace(pod, topology=got), None, None
    if pod.gated:
        return None, got, None
    return pod, None, dataclasses.replace(got, outcome=PLANNED_WITHOUT, pod=None).line()


def _levels(pod: PodView, h: Hierarchy) -> JobTopology | ObjectWarning:
    """The pod's request by level names, or the warning that says why it cannot be read."""
    ask = pod.topology_ask

    def wrong(key: str, value: str, message: str) -> ObjectWarning:
        return ObjectWarning(f"pod {pod.full_name}", f"metadata.annotations.{key}", show(value), message, LEFT_OUT,
                             (pod.namespace, pod.name))

    if h.kueue is not None and ask.named is not None and ask.named != h.kueue:
        return wrong(KAI_TOPOLOGY_ANNOTATION, ask.named, f"must name the Topology gpu-policy places by ({h.kueue})")
    by_key = {level.name: level.name for level in h.levels} | {level.label: level.name for level in h.levels}
    known = ", ".join(level.name if level.name == level.label else f"{level.name} ({level.label})"
                      for level in h.levels) or "none"
    chosen = {}
    for field, written in (("required", ask.required), ("preferred", ask.preferred)):
        if written is not None:
            key, value = written
            if value not in by_key:
                return wrong(key, value, f"must name a topology level of {h.source} (levels: {known})")
            chosen[field] = by_key[value]
    order = [level.name for level in h.levels]
    if len(chosen) == 2 and order.index(chosen["preferred"]) <= order.index(chosen["required"]):
        key, value = ask.preferred
        return wrong(key, value, f"must be a level narrower than the required {chosen['required']}")
    return JobTopology(**chosen)


def words(t: JobTopology | None) -> str:
    """A job's request as messages say it: `required rack, preferred host`, or `none`."""
    if t is None:
        return "none"
    return ", ".join(f"{field} {level}" for field, level in (("required", t.required), ("preferred", t.preferred))
                     if level is not None)
