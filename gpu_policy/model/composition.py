"""The rules of GPU composition that every part shares (docs/composition.md).

A composable node takes pool GPUs of its own model (a node without GPUs and without a
model takes any); attached GPUs are the node's highest GPU indices; a detach gives back
the highest ones, which must be free. The planner decides within `attachable` and
`detachable`; `apply_compositions` is what carrying a plan out does to a scenario (the
embedded cluster, `--apply-to`); `uses_new_gpus` says which replicas of a start sit on
GPUs that are not there yet.
"""

from __future__ import annotations

import dataclasses

from gpu_policy.model import ComposableNode, ComposablePool, Node, Scenario
from gpu_policy.model.plan import Composition, JobDecision, Plan


def node_takes(node: Node, model: str) -> bool:
    """Whether pool GPUs of `model` can join the node's GPUs (one model per node)."""
    return node.gpu_model == model or (node.gpu_model is None and node.gpus == 0)


def attachable(s: Scenario, node_name: str, model: str) -> int:
    """How many GPUs of `model` composition can attach to the node now: within its
    `max_gpus` and what the pool has free; 0 for a node that is not composable."""
    c = s.composable
    return _room(s.node(node_name), c.node(node_name) if c else None, c.pool(model) if c else None, model)


def _room(node: Node, spot: ComposableNode | None, pool: ComposablePool | None, model: str) -> int:
    if spot is None or pool is None or not node_takes(node, model):
        return 0
    return max(0, min(spot.max_gpus - node.gpus, pool.free))


def detachable(s: Scenario, node_name: str) -> int:
    """How many GPUs composition attached to the node and may give back."""
    spot = s.composable.node(node_name) if s.composable else None
    return spot.attached if spot else 0


def uses_new_gpus(decision: JobDecision, usable: dict[str, int]) -> set[str]:
    """The nodes where a started job has a replica on GPUs that are not usable yet
    (indices at or above `usable[node]`, the GPUs there before the attach)."""
    return {r.node for r in decision.replicas if r.node in usable and any(i >= usable[r.node] for i in r.gpu_indices)}


def describe(c: Composition) -> str:
    """What a composition does, in words: "attach 2 A100-80GB to node-3"."""
    return f"attach {c.change} {c.model} to {c.node}" if c.change > 0 else f"detach {-c.change} {c.model} from {c.node}"


def apply_compositions(s: Scenario, plan: Plan) -> Scenario:
    """The scenario with the plan's GPUs attached and detached: node GPUs, the composable
    node's `attached` and the pool's `free` change together. A composition the scenario
    cannot carry out is a bug of the plan: ValueError."""
    if not plan.compositions:
        return s
    if s.composable is None:
        raise ValueError(f"the plan composes GPUs ({plan.compositions[0].node}) but the scenario has no composable: section")
    nodes = {n.name: dataclasses.replace(n, unhealthy_gpus=list(n.unhealthy_gpus)) for n in s.nodes}
    spots = {n.name: dataclasses.replace(n) for n in s.composable.nodes}
    pools = {p.model: dataclasses.replace(p) for p in s.composable.pools}
    held = _held_after(plan)
    for c in plan.compositions:
        node, spot, pool = nodes.get(c.node), spots.get(c.node), pools.get(c.model)
        if node is None or spot is None or pool is None:
            raise ValueError(f"the plan composes {c.model} GPUs on {c.node}, which is not a composable node with that pool")
        _check_composition(c, node, spot, pool, held)
        if c.change > 0:
            node.gpu_model = c.model  # attached GPUs are the pool's model
        node.gpus += c.change
        node.unhealthy_gpus = [i for i in node.unhealthy_gpus if i < node.gpus]
        spot.attached += c.change
        pool.free -= c.change
    beyond = sorted((n, i) for n, i in held if n in nodes and i >= nodes[n].gpus)
    if beyond:
        raise ValueError(f"the plan runs a job on GPU {beyond[0][1]} of {beyond[0][0]}, which has "
                         f"{nodes[beyond[0][0]].gpus} GPUs after its compositions")
    composable = dataclasses.replace(s.composable, pools=list(pools.values()), nodes=list(spots.values()))
    return dataclasses.replace(s, nodes=[nodes[n.name] for n in s.nodes], composable=composable,
                               telemetry=_without_gone_gpus(s.telemetry, nodes))


def _check_composition(c: Composition, node: Node, spot: ComposableNode, pool: ComposablePool,
                       held: set[tuple[str, int]]) -> None:
    """An attach within the node's room; a detach of GPUs composition attached and no job holds
    after the plan."""
    if c.change > 0:
        room = _room(node, spot, pool, c.model)
        if c.change > room:
            raise ValueError(f"the plan attaches {c.change} {c.model} to {c.node}, which can take {room}")
    elif -c.change > spot.attached:
        raise ValueError(f"the plan detaches {-c.change} GPUs from {c.node}, which has {spot.attached} attached")
    else:
        busy = [i for i in range(node.gpus + c.change, node.gpus) if (c.node, i) in held]
        if busy:
            raise ValueError(f"the plan detaches GPU {busy[0]} of {c.node}, which a job holds after the plan")


def _held_after(plan: Plan) -> set[tuple[str, int]]:
    """(node, GPU index) of every GPU a job holds after the plan."""
    return {(r.node, i) for d in plan.jobs if d.action in ("keep", "start", "move") for r in d.replicas
            for i in r.gpu_indices}


def _without_gone_gpus(telemetry: dict | None, nodes: dict[str, Node]) -> dict | None:
    """Simulated faults of detached GPUs go with them."""
    if not telemetry or not telemetry.get("gpus"):
        return telemetry
    kept = [f for f in telemetry["gpus"] if f["gpu"] < nodes[f["node"]].gpus]
    return {**telemetry, "gpus": kept}


__all__ = ["Composition", "apply_compositions", "attachable", "describe", "detachable", "node_takes",
           "uses_new_gpus"]
