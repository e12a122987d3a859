"""Composition as a live cluster describes it -> the scenario's `composable:` section.

Composable nodes carry the label `gpu-policy.io/composable: "true"` and the annotation
`gpu-policy.io/max-gpus`; the ConfigMap `gpu-policy-composable` (key `composable.yaml`)
holds the pools and settings; gpu-policy's own ComposabilityRequests say what it attached.
What this module decides where the contract is silent (docs/composition.md):

- The ConfigMap's `free` is what the pool holds when no ComposabilityRequest holds any of
  it: each look subtracts the `size` of every GPU request of that model, gpu-policy's own
  and others', so the snapshot's `free` is what is free now, and nobody must keep the
  ConfigMap up to date.
- A node is planned as it will be once gpu-policy's requests are done: its allocatable GPUs,
  less the devices its requests have Online that the device plugin counts already (it
  follows the operator by seconds: `DevicePluginLag`), plus their `size`. GPUs being
  attached are part of it (the node's highest indices; a step placed on them waits for
  them, and a reservation can hold them); GPUs being detached are not. `attached` is that
  total. A node whose device plugin has not counted a change yet (settling) is left out of
  the composable nodes: nothing is attached to it or detached from it until it has.
- A request of gpu-policy's that is not complete `deadline_s` after its last change counts
  at the size it had before (what the next execution rolls it back to).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from gpu_policy.model.composition import uses_new_gpus
from gpu_policy.errors import ClusterObjectError, InputError, ScenarioError
from gpu_policy.kubernetes.names import COMPOSABLE_KEY, GPU_PRODUCT_LABEL
from gpu_policy.kubernetes.read.nodes import NodeView
from gpu_policy.kubernetes.read.requests import RequestView
from gpu_policy.kubernetes.read.settle import DevicePluginLag
from gpu_policy.model import Node
from gpu_policy.model.plan import JobDecision
from gpu_policy.model.safe_load import parse_text
from gpu_policy.model.scenario_file import parse_scenario

#: the ConfigMap's keys: the scenario's `composable:` section without `nodes` (they come from node labels)
_SETTINGS = ("pools", "attach_seconds", "idle_detach_s", "before_preemption")


def settings_from_config_map(config_map: dict) -> dict:
    """The ConfigMap's ``composable.yaml``, checked like a scenario's `composable:` section."""
    meta = config_map.get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace')}/{meta.get('name')}"
    field_name = f"data.{COMPOSABLE_KEY}"
    text = (config_map.get("data") or {}).get(COMPOSABLE_KEY)
    if text is None:
        raise ClusterObjectError(where, field_name, "is required: a YAML mapping with pools: [{model, free}]")
    try:
        settings = parse_text(text, f"{where}: {field_name}")  # bounded: size, depth, aliases
    except InputError as e:
        raise ClusterObjectError(where, field_name, e.problem if not e.field else f"{e.field}: {e.problem}") from None
    if not isinstance(settings, dict):
        raise ClusterObjectError(where, field_name, f"must be a mapping with pools: [{{model, free}}], got "
                                                    f"{type(settings).__name__}")
    if "nodes" in settings:
        raise ClusterObjectError(where, f"{field_name}.nodes", "composable nodes come from the node label "
                                                                 "gpu-policy.io/composable and annotation gpu-policy.io/max-gpus")
    try:
        parse_scenario({"composable": settings}, where)
    except ScenarioError as e:
        raise ClusterObjectError(where, f"{field_name}{e.field.removeprefix('composable')}", e.problem) from None
    return settings


@dataclass
class ComposedNodes:
    """What composition adds to one look: the `composable:` section, each composable node's
    GPUs as planned, and how many of them are still being attached."""

    section: dict
    nodes: list[NodeView]
    attaching: dict[str, int] = field(default_factory=dict)  # node -> GPUs of its highest indices not there yet
    requests: dict[tuple[str, str], RequestView] = field(default_factory=dict)  # (node, model) -> gpu-policy's request
    settling: set[str] = field(default_factory=set)  # nodes not composed until their device plugin counts a change
    warnings: list[str] = field(default_factory=list)

    def waits_on(self, decision: JobDecision, nodes: list[Node]) -> set[str]:
        """The nodes (of the look's scenario, `nodes`) where a started job has a replica on
        GPUs that are not there yet: being attached by a request, or by the plan's own
        compositions (slots beyond the node's GPUs)."""
        return uses_new_gpus(decision, {n.name: n.gpus - self.attaching.get(n.name, 0) for n in nodes})


def planned_size(r: RequestView, now: float, deadline_s: float) -> int:
    """The GPUs a request of gpu-policy's is planned with: its size, or, past its deadline,
    the size before (what a rollback restores); none while it is being deleted."""
    if r.deleting:
        return 0
    return r.previous_size if overdue(r, now, deadline_s) else r.size


def overdue(r: RequestView, now: float, deadline_s: float) -> bool:
    """Not complete `deadline_s` after gpu-policy last changed its size."""
    return not r.complete and not r.deleting and r.requested_at is not None and now - r.requested_at > deadline_s


def compose_nodes(settings: dict, nodes: list[NodeView], requests: list[RequestView], now: float,
                  deadline_s: float, lag: DevicePluginLag, where: str) -> ComposedNodes:
    """The composable nodes as they will be once gpu-policy's requests are done, and the
    pools as they are now (see the module's docstring)."""
    out = ComposedNodes(section={}, nodes=[])
    composed = []
    for view in nodes:
        if view.max_gpus is None:
            out.nodes.append(view)
            continue
        entry = _compose_node(view, _requests_of(view, requests, out), now, deadline_s, lag, out)
        if entry is not None:
            composed.append(entry)
    out.section = {**settings, "pools": _pools_now(settings.get("pools") or [], requests, now, deadline_s, out, where),
                   "nodes": composed}
    _check_models(out, where)
    return out


def _requests_of(view: NodeView, requests: list[RequestView], out: ComposedNodes) -> list[RequestView]:
    """gpu-policy's requests for the node; one of another model than the node's GPUs is not
    counted as gpu-policy's (with a warning)."""
    mine = []
    for r in requests:
        if not r.ours or r.node != view.name:
            continue
        if view.gpu_model is not None and r.model != view.gpu_model:
            out.warnings.append(f"ComposabilityRequest {r.name} attaches {r.model} to {view.name}, whose GPUs are "
                                f"{view.gpu_model}: not counted as gpu-policy's")
        else:
            mine.append(r)
    out.requests.update({(r.node, r.model): r for r in mine})
    return mine


def _compose_node(view: NodeView, mine: list[RequestView], now: float, deadline_s: float, lag: DevicePluginLag,
                  out: ComposedNodes) -> dict | None:
    """The composable node as planned (into `out`), and its entry of the `composable:` section;
    None while its device plugin settles."""
    online = sum(r.online for r in mine)
    planned = sum(planned_size(r, now, deadline_s) for r in mine)
    counted, settling = lag.counted(view.name, view.gpus, online, now)
    gpus = view.gpus - counted + planned
    if gpus > view.max_gpus:
        raise ClusterObjectError(f"node {view.name}", "metadata.annotations.gpu-policy.io/max-gpus",
                                 f"must be at least the node's {gpus} GPUs (allocatable, and being attached), "
                                 f"got {view.max_gpus}")
    out.attaching[view.name] = min(gpus, max(0, planned - online))
    model = view.gpu_model or next((r.model for r in mine if planned_size(r, now, deadline_s)), None)
    out.nodes.append(dataclasses.replace(view, gpus=gpus, gpu_model=model))
    entry = None
    if settling:
        out.settling.add(view.name)
        out.warnings.append(f"node {view.name}: its allocatable {view.gpus} GPUs do not count the change of "
                            f"gpu-policy's devices Online there yet (the device plugin follows the CDI operator): "
                            f"not composed until they do, at most {lag.settle_s:g} s")
    else:
        entry = {"name": view.name, "max_gpus": view.max_gpus, "attached": min(planned, gpus)}
    for r in mine:
        if overdue(r, now, deadline_s):
            out.warnings.append(f"ComposabilityRequest {r.name}: not complete {deadline_s:g} s after its size "
                                f"became {r.size} ({r.errors() or r.stage()}): planned at size {r.previous_size}, "
                                "to which the next execution rolls it back")
    return entry


def _pools_now(pools: list[dict], requests: list[RequestView], now: float, deadline_s: float, out: ComposedNodes,
               where: str) -> list[dict]:
    """Each pool's free GPUs now: what the ConfigMap says less what every request holds."""
    def holds(r: RequestView) -> int:
        if r.deleting:
            return r.online  # its devices go back as the operator cleans up
        return planned_size(r, now, deadline_s) if r.ours else r.size

    result = []
    for pool in pools:
        held = sum(holds(r) for r in requests if r.model == pool["model"])
        free = pool["free"] - held
        if free < 0:
            out.warnings.append(f"{where}: pool {pool['model']}: ComposabilityRequests hold {held} GPUs, more than its "
                                f"{pool['free']}: planned with none free")
        result.append({"model": pool["model"], "free": max(0, free)})
    return result


def _check_models(out: ComposedNodes, where: str) -> None:
    """Attached GPUs go back to the pool of their node's model: that pool must exist."""
    models = {p["model"] for p in out.section["pools"]}
    views = {v.name: v for v in out.nodes}
    for node in out.section["nodes"]:
        model = views[node["name"]].gpu_model
        if node["attached"] and model not in models:
            raise ClusterObjectError(where, f"data.{COMPOSABLE_KEY}.pools",
                                     f"has no model {model!r}, the {GPU_PRODUCT_LABEL} of {node['name']}, to which "
                                     "gpu-policy attached GPUs")
