"""One look at a cluster's objects -> its Snapshot: the mapping both the one-shot commands
(objects LISTed now) and the controller (objects from its informer cache) use, so a
snapshot of the cache is what `gpu-policy snapshot` prints.

`reads` answers the few reads a look needs besides nodes and pods: `read_config_map`,
`list_kai_queues`, `list_namespaces` and `list_composability_requests`. KubeClient asks
the API server; the controller's cache answers from memory. Namespaces, KAI queues,
the composable ConfigMap and ComposabilityRequests are read only when the look needs them.
"""

from __future__ import annotations

from typing import Protocol

from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.composable import ComposedNodes, compose_nodes, settings_from_config_map
from gpu_policy.kubernetes.isolate import ObjectWarning, placeable
from gpu_policy.kubernetes.names import (COMPOSABLE_CONFIGMAP, COMPOSABLE_KEY, QUEUES_CONFIGMAP, QUEUES_KEY,
                                         RESERVATIONS_CONFIGMAP)
from gpu_policy.kubernetes.nodes import NodeView
from gpu_policy.kubernetes.pods import PodRef, PodView
from gpu_policy.kubernetes.queues import queues_from_config_map, queues_from_kai
from gpu_policy.kubernetes.requests import read_request
from gpu_policy.kubernetes.reservations import read_reservations
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.snapshot import Snapshot, build_scenario, namespace_queues, needs_namespace_list
from gpu_policy.model import Queue


class Reads(Protocol):
    def read_config_map(self, name: str) -> dict | None: ...
    def list_kai_queues(self) -> list[dict] | None: ...
    def list_namespaces(self) -> list[dict]: ...
    def list_composability_requests(self) -> list[dict] | None: ...


def look(reads: Reads, settings: KubernetesSettings, nodes: list[NodeView], pods: list[PodView], now: float,
         source: str, bad: list[ObjectWarning] = ()) -> tuple[Snapshot, list[str], list[ObjectWarning]]:
    """The snapshot of these nodes and pods; the warnings of reading the rest (one line
    each, the objects left out first); and the objects left out or left waiting (`bad`,
    the nodes and pods that could not be read, and the pods no node could ever hold)."""
    pods, unplaceable = placeable(pods, nodes, settings.gpu_resource)
    bad = list(bad) + unplaceable
    queues, warnings = _queues(reads, settings, sum(n.gpus for n in nodes))
    reservations, unreadable = read_reservations(reads.read_config_map(RESERVATIONS_CONFIGMAP))
    warnings += unreadable.values()
    labels = _namespace_labels(reads) if needs_namespace_list(pods, queues) else {}
    composed = _composition(reads, settings, nodes, now, warnings)
    snap = build_scenario(nodes, pods, queues, namespace_queues(labels), reservations, now, source, composed, labels)
    snap.stale |= set(unreadable)  # gpu-policy's own, yet unreadable: dropped at the next write
    snap.marked = _marked(pods, snap.pods)
    return snap, [b.line() for b in bad] + warnings, bad


def _queues(reads: Reads, settings: KubernetesSettings, cluster_gpus: int) -> tuple[list[Queue], list[str]]:
    """The queues ConfigMap when it exists (or must), else KAI-Scheduler's Queue objects."""
    mode = settings.queues
    if mode != "kai":
        config_map = reads.read_config_map(QUEUES_CONFIGMAP)
        if config_map is not None:
            return queues_from_config_map(config_map), []
        if mode == "configmap":
            raise ClusterObjectError(f"ConfigMap {settings.namespace}/{QUEUES_CONFIGMAP}", "",
                                     f"does not exist: create it with a {QUEUES_KEY} key (deploy/examples/queues.yaml)")
    kai = reads.list_kai_queues()
    if not kai:
        return [], [f"no queues: neither the ConfigMap {settings.namespace}/{QUEUES_CONFIGMAP} nor KAI-Scheduler "
                    "Queue objects exist, so every GPU pod is unmanaged (docs/kubernetes.md)"]
    return queues_from_kai(kai, cluster_gpus), []


def _namespace_labels(reads: Reads) -> dict[str, dict[str, str]]:
    """Namespace -> its labels; a namespace whose fields have the wrong types reads as unlabelled."""
    out = {}
    for ns in reads.list_namespaces():
        meta = ns.get("metadata") if isinstance(ns, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        out[meta["name"]] = {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
    return out


def _composition(reads: Reads, settings: KubernetesSettings, nodes: list[NodeView], now: float,
                 warnings: list[str]) -> ComposedNodes | None:
    """Composition as the cluster has it: None unless a node is labelled composable and
    the composable ConfigMap and the operator's CRD exist."""
    composable = [n.name for n in nodes if n.max_gpus is not None]
    if not composable:
        return None
    where = f"ConfigMap {settings.namespace}/{COMPOSABLE_CONFIGMAP}"
    config_map = reads.read_config_map(COMPOSABLE_CONFIGMAP)
    if config_map is None:
        warnings.append(f"nodes {', '.join(composable[:5])} are labelled composable, but {where} does not exist: "
                        f"no GPUs are attached or detached (docs/composition.md)")
        return None
    composition = settings_from_config_map(config_map)
    listed = reads.list_composability_requests()
    if listed is None:
        warnings.append(f"{where} exists, but the cluster has no ComposabilityRequest resource (is the CDI "
                        "operator installed?): no GPUs are attached or detached")
        return None
    requests = [r for r in map(read_request, listed) if r is not None]
    return compose_nodes(composition, nodes, requests, now, settings.composition_deadline_s,
                         f"{where}: data.{COMPOSABLE_KEY}")


def _marked(pods: list[PodView], jobs: dict[str, list[PodRef]]) -> dict[str, list[PodRef]]:
    """The pods still marked preempted and not on their way out, by job (the pod's own name
    when it belongs to no planned job)."""
    job_of = {ref.uid: job for job, refs in jobs.items() for ref in refs}
    out: dict[str, list[PodRef]] = {}
    for p in pods:
        if p.marked and not p.deleting:
            out.setdefault(job_of.get(p.uid, p.full_name), []).append(p.ref)
    return out
