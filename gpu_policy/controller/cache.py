"""The informer cache: every watched object as the last LIST and the WATCH events since
left it, with each pod and node read into its view once per change (not once per plan).

It answers the reads of one look (gpu_policy.kubernetes.read.look) from memory, so a snapshot
of the cache is what `gpu-policy snapshot` would print for the same objects. A pod or node
gpu-policy cannot read (wrong JSON types, a bad annotation) is left out with a warning
naming it and the field, as the one-shot commands do (gpu_policy.kubernetes.read.isolate).
"""

from __future__ import annotations

import bisect
from typing import Callable

from gpu_policy.kubernetes.names import USAGE_CONFIGMAP
from gpu_policy.kubernetes.read.isolate import ObjectWarning, read_one
from gpu_policy.kubernetes.read.memo import LookMemo
from gpu_policy.kubernetes.read.nodes import NodeView, read_node
from gpu_policy.kubernetes.read.pods import PodView, read_pod
from gpu_policy.kubernetes.read.shape import NODE, POD
from gpu_policy.kubernetes.read.workloads import trim_train_job
# the kinds the controller watches, as KubeClient names them (DRA_AND_POD_GROUPS: where served)
from gpu_policy.kubernetes.transport.kinds import (
    COMPOSABILITY_REQUESTS, CONFIG_MAPS, COSCHEDULING_POD_GROUPS, DEVICE_CLASSES, DEVICE_TAINT_RULES, DRA_AND_POD_GROUPS,
    KAI_POD_GROUPS, KAI_QUEUES, KUEUE_TOPOLOGY_OBJECTS, NAMESPACES, NODES, PODS, RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS, RESOURCE_SLICES, TRAIN_JOBS, VOLCANO_POD_GROUPS)

#: kind -> (the word warnings use, its type schema, its reader)
_READERS: dict[str, tuple[str, dict, Callable[[dict, str], object]]] = {NODES: ("node", NODE, read_node),
                                                                       PODS: ("pod", POD, read_pod)}
#: kind -> what of its objects the cache keeps: only a change of that can matter to a plan
_TRIMS: dict[str, Callable[[dict], dict]] = {TRAIN_JOBS: trim_train_job}
#: kind -> names of its objects that no plan reads from the cache: their changes plan nothing (the
#: leader's usage history, which it keeps itself and writes every minute)
_UNPLANNED: dict[str, set[str]] = {CONFIG_MAPS: {USAGE_CONFIGMAP}}


def _listed(kind: str) -> Callable[[Cache], list[dict] | None]:
    """The Cache's answer to a LIST of `kind`: its objects in the order a LIST answers them;
    None when the cluster does not serve it."""
    def listed(cache: Cache) -> list[dict] | None:
        return [o for _, o in sorted(cache.objects[kind].items())] if cache.served.get(kind) else None

    return listed


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _kept(kind: str, obj: dict) -> dict:
    """What the cache holds of `obj`: its kind's trim (`_TRIMS`), else the whole object; a LIST
    and a WATCH event keep the same, so a relist changes nothing that no event would."""
    trim = _TRIMS.get(kind)
    return trim(obj) if trim else obj


def _unversioned(obj: dict) -> dict:
    return {**obj, "metadata": {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}}


def _version(obj: dict) -> int | None:
    text = (obj.get("metadata") or {}).get("resourceVersion") or ""
    return int(text) if text.isdigit() else None


class Cache:
    """Objects by kind and (namespace, name); `views` holds what each node and pod reads as."""

    def __init__(self, gpu_resource: str):
        self.gpu_resource = gpu_resource
        self.objects: dict[str, dict[tuple[str, str], dict]] = {}
        self.views: dict[str, dict[tuple[str, str], object]] = {NODES: {}, PODS: {}}
        self._order: dict[str, list[tuple[str, str]]] = {NODES: [], PODS: []}  # view keys, in LIST order
        self._bad: dict[str, set[tuple[str, str]]] = {NODES: set(), PODS: set()}  # keys of views left out
        self.served: dict[str, bool] = {}  # kind -> whether the cluster serves it (KAI queues may not exist)
        self.memo = LookMemo()  # what the last look made of these views: the next makes only what changed

    @property
    def synced(self) -> bool:
        return NODES in self.objects and PODS in self.objects

    def replace(self, kind: str, items: list[dict] | None) -> None:
        """A LIST's answer: the kind is exactly these objects now (None: not served)."""
        self.served[kind] = items is not None
        if kind not in self.views:  # swapped in whole: the webhook's threads read namespaces, never half a relist
            self.objects[kind] = {_key(o): _kept(kind, o) for o in items or []}
            return
        self.objects[kind], self.views[kind], self._order[kind], self._bad[kind] = {}, {}, [], set()
        for obj in items or []:
            self.apply(kind, "ADDED", obj, listed=True)
        self._order[kind] = sorted(self.views[kind])

    def apply(self, kind: str, kind_of_change: str, obj: dict, listed: bool = False) -> bool:
        """One WATCH event (or a write's answer; `listed`: an object of a LIST, put in order
        after); True when it changes what a plan sees. An event older than the object held (a
        write's answer arrived first) is ignored."""
        store, key = self.objects.setdefault(kind, {}), _key(obj)
        held = store.get(key)
        trim = _TRIMS.get(kind)
        obj = _kept(kind, obj)
        if held is not None and kind_of_change != "DELETED":
            mine, theirs = _version(held), _version(obj)
            if mine is not None and theirs is not None and theirs < mine:
                return False
        if kind_of_change == "DELETED":
            store.pop(key, None)
            if kind in self.views:
                gone = self.views[kind].pop(key, None)
                if gone is not None:
                    order = self._order[kind]
                    del order[bisect.bisect_left(order, key)]
                    self._bad[kind].discard(key)
                return gone is not None
            return held is not None and key[1] not in _UNPLANNED.get(kind, ())
        store[key] = obj
        if key[1] in _UNPLANNED.get(kind, ()):
            return False
        if trim:
            return held is None or _unversioned(held) != _unversioned(obj)
        if kind not in self.views:
            return True
        before = self.views[kind].get(key)
        word, schema, read = _READERS[kind]
        view = read_one(obj, word, schema, lambda o: read(o, self.gpu_resource))
        self.views[kind][key] = view
        if before is None and not listed:
            bisect.insort(self._order[kind], key)
        (self._bad[kind].add if isinstance(view, ObjectWarning) else self._bad[kind].discard)(key)
        return before != view

    def node_views(self) -> list[NodeView]:
        return self._views(NODES)

    def pod_views(self) -> list[PodView]:
        return self._views(PODS)

    def bad(self) -> list[ObjectWarning]:
        """The nodes and pods left out because they cannot be read."""
        return [self.views[kind][key] for kind in (NODES, PODS) for key in sorted(self._bad[kind])]

    def _views(self, kind: str) -> list:
        """In the order a LIST answers (namespace, then name), so the look maps as a LIST's would;
        the order is kept as objects come and go, not sorted again for every look."""
        views, bad = self.views[kind], self._bad[kind]
        return [views[key] for key in self._order[kind] if key not in bad] if bad else \
            [views[key] for key in self._order[kind]]

    def pod(self, namespace: str, name: str) -> dict | None:
        return self.objects.get(PODS, {}).get((namespace, name))

    # -- the reads of one look (gpu_policy.kubernetes.read.look.Reads) -----------------------------
    def read_config_map(self, name: str) -> dict | None:
        return next((o for (_, n), o in self.objects.get(CONFIG_MAPS, {}).items() if n == name), None)

    def list_namespaces(self) -> list[dict]:
        return list(self.objects.get(NAMESPACES, {}).values())

    list_kai_queues = _listed(KAI_QUEUES)
    list_composability_requests = _listed(COMPOSABILITY_REQUESTS)  # None (no CDI operator): composition is off
    list_resource_slices = _listed(RESOURCE_SLICES)
    list_resource_claims = _listed(RESOURCE_CLAIMS)
    list_resource_claim_templates = _listed(RESOURCE_CLAIM_TEMPLATES)
    list_device_classes = _listed(DEVICE_CLASSES)
    list_device_taint_rules = _listed(DEVICE_TAINT_RULES)
    list_kai_pod_groups = _listed(KAI_POD_GROUPS)
    list_volcano_pod_groups = _listed(VOLCANO_POD_GROUPS)
    list_coscheduling_pod_groups = _listed(COSCHEDULING_POD_GROUPS)
    list_train_jobs = _listed(TRAIN_JOBS)
    list_kueue_topologies = _listed(KUEUE_TOPOLOGY_OBJECTS)

