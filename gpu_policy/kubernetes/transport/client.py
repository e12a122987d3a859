"""Every API call gpu-policy makes, one method each, through the real `kubernetes` client.

Kind to the API server (docs/kubernetes.md): LISTs are paginated, answers are read as raw
JSON (no per-object model building), and every request is bounded, retried and worded the
same way (`sender.Sender`). Each method declares the RBAC permission it needs
(`permissions.PERMISSIONS`; the watched kinds' LISTs and WATCHes in `kinds.KINDS`); deploy/
grants exactly those, and a test checks both ways.

Only API that kubernetes client 30.x and 36.x (and 37.x) all have is used: the typed
API classes with keyword arguments, ``_preload_content=False`` and ``_request_timeout``.
"""

from __future__ import annotations

import random
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from gpu_policy.kubernetes.names import CRO_GROUP, CRO_PLURAL, CRO_VERSION
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.transport.answers import Answer
from gpu_policy.kubernetes.transport.kinds import (
    COMPOSABILITY_REQUESTS, COSCHEDULING_POD_GROUPS, DEVICE_CLASSES, DEVICE_TAINT_RULES, KAI_POD_GROUPS, KAI_QUEUES,
    KINDS, KUEUE_TOPOLOGY_OBJECTS, NAMESPACES, NODES, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, RESOURCE_SLICES,
    TRAIN_JOBS, VOLCANO_POD_GROUPS, Kind)
from gpu_policy.kubernetes.transport.permissions import needs
from gpu_policy.kubernetes.transport.sender import Sender

#: an Event write that fails is counted, never fatal (spec "Events": best effort)
_EVENT_REFUSALS = frozenset({400, 403, 404, 409, 422})


def _listing(kind: str, doc: str):
    """KubeClient's one-shot LIST of every object of `kind` (KINDS), declaring its permission."""
    row = KINDS[kind]

    @needs("list", row.resource, group=row.group, own_namespace=row.own_namespace)
    def listing(self) -> list[dict] | None:
        return self.list_kind(kind)[0]

    listing.__name__, listing.__doc__ = f"list_{kind}", doc
    return listing


class KubeClient(Sender):
    """The requests gpu-policy sends, each bounded, retried and worded the same way."""

    def __init__(self, api_client, where: str, settings: KubernetesSettings,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 jitter: Callable[[], float] = random.random):
        from kubernetes import client

        super().__init__(api_client, where, settings, sleep, monotonic, jitter)
        self._core = client.CoreV1Api(api_client)
        self._coordination = client.CoordinationV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._events = client.EventsV1Api(api_client)
        self._models = client
        self._served: dict[str, str] = {}  # kind -> the version its last LIST found served (KINDS' `older`)

    # -- reads of one observation --------------------------------------------------------------
    list_nodes = _listing(NODES, "Every node.")
    list_pods = _listing(PODS, "Pods of all namespaces that are not finished.")
    list_namespaces = _listing(NAMESPACES, "Every namespace.")
    list_kai_queues = _listing(KAI_QUEUES, "KAI-Scheduler's Queue objects; None when the cluster has no such resource.")
    list_resource_slices = _listing(RESOURCE_SLICES, "DRA ResourceSlices; None when the cluster has no "
                                                     "resource.k8s.io/v1.")
    list_resource_claims = _listing(RESOURCE_CLAIMS, "DRA ResourceClaims of all namespaces.")
    list_resource_claim_templates = _listing(RESOURCE_CLAIM_TEMPLATES, "DRA ResourceClaimTemplates of all namespaces.")
    list_device_classes = _listing(DEVICE_CLASSES, "DRA DeviceClasses.")
    list_device_taint_rules = _listing(DEVICE_TAINT_RULES, "DeviceTaintRules (resource.k8s.io/v1 since Kubernetes "
                                                           "1.37); None when not served.")
    list_kai_pod_groups = _listing(KAI_POD_GROUPS, "KAI-Scheduler's PodGroups in all namespaces; None when the "
                                                   "cluster has no such resource.")
    list_volcano_pod_groups = _listing(VOLCANO_POD_GROUPS, "Volcano's PodGroups in all namespaces.")
    list_coscheduling_pod_groups = _listing(COSCHEDULING_POD_GROUPS, "The coscheduling plugin's PodGroups.")
    list_train_jobs = _listing(TRAIN_JOBS, "Kubeflow Trainer's TrainJobs in all namespaces; None when the cluster has "
                                           "no such resource.")
    list_composability_requests = _listing(COMPOSABILITY_REQUESTS, "Every ComposabilityRequest; None when the "
                                                                   "operator's CRD is not installed.")
    list_kueue_topologies = _listing(KUEUE_TOPOLOGY_OBJECTS, "Kueue's Topology objects, at v1beta2, else v1beta1; "
                                                             "None when the cluster serves neither.")

    @needs("get", "configmaps", own_namespace=True)
    def read_config_map(self, name: str) -> dict | None:
        """The ConfigMap in gpu-policy's namespace; None when it does not exist."""
        ns = self.settings.namespace
        answer = self._request(f"get ConfigMap {ns}/{name}", lambda **kw: self._core.read_namespaced_config_map(
            name=name, namespace=ns, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    # -- writes ---------------------------------------------------------------------------------
    @needs("create", "configmaps", own_namespace=True)
    def create_config_map(self, name: str, data: dict[str, str]) -> dict | None:
        """Create it; None when it already exists (someone was faster)."""
        ns = self.settings.namespace
        body = self._models.V1ConfigMap(metadata=self._models.V1ObjectMeta(name=name, namespace=ns), data=data)
        answer = self._request(f"create ConfigMap {ns}/{name}", lambda **kw: self._core.create_namespaced_config_map(
            namespace=ns, body=body, **kw), accept={409}, fenced=True)
        return None if answer.status == 409 else answer.body

    @needs("update", "configmaps", own_namespace=True)
    def replace_config_map(self, name: str, data: dict[str, str], resource_version: str) -> dict | None:
        """Replace it if it is still at `resource_version`; None on a conflict (409)."""
        ns = self.settings.namespace
        meta = self._models.V1ObjectMeta(name=name, namespace=ns, resource_version=resource_version)
        body = self._models.V1ConfigMap(metadata=meta, data=data)
        answer = self._request(f"update ConfigMap {ns}/{name}", lambda **kw: self._core.replace_namespaced_config_map(
            name=name, namespace=ns, body=body, **kw), accept={409}, fenced=True)
        return None if answer.status == 409 else answer.body

    @needs("get", "leases", group="coordination.k8s.io", own_namespace=True)
    def read_lease(self, name: str) -> dict | None:
        ns = self.settings.namespace
        answer = self._request(f"get Lease {ns}/{name}", lambda **kw: self._coordination.read_namespaced_lease(
            name=name, namespace=ns, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @needs("create", "leases", group="coordination.k8s.io", own_namespace=True)
    def create_lease(self, name: str, spec: dict) -> dict | None:
        """Create it; None when it already exists."""
        ns = self.settings.namespace
        body = self._models.V1Lease(metadata=self._models.V1ObjectMeta(name=name, namespace=ns),
                                    spec=self._lease_spec(spec))
        answer = self._request(f"create Lease {ns}/{name}", lambda **kw: self._coordination.create_namespaced_lease(
            namespace=ns, body=body, **kw), accept={409})
        return None if answer.status == 409 else answer.body

    @needs("update", "leases", group="coordination.k8s.io", own_namespace=True)
    def replace_lease(self, name: str, spec: dict, resource_version: str,
                      deadline_s: float | None = None) -> dict | None:
        """Write it if it is still at `resource_version`; None when another holder wrote first.
        Retried within `deadline_s` (default: the settings')."""
        ns = self.settings.namespace
        meta = self._models.V1ObjectMeta(name=name, namespace=ns, resource_version=resource_version)
        body = self._models.V1Lease(metadata=meta, spec=self._lease_spec(spec))
        answer = self._request(f"update Lease {ns}/{name}", lambda **kw: self._coordination.replace_namespaced_lease(
            name=name, namespace=ns, body=body, **kw), accept={409}, deadline_s=deadline_s)
        return None if answer.status == 409 else answer.body

    @needs("get", "pods")
    def read_pod(self, namespace: str, name: str) -> dict | None:
        answer = self._request(f"get pod {namespace}/{name}", lambda **kw: self._core.read_namespaced_pod(
            name=name, namespace=namespace, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @needs("patch", "pods")
    def patch_pod_metadata(self, namespace: str, name: str, annotations: dict[str, str] | None = None,
                           labels: dict[str, str] | None = None) -> dict | None:
        """Merge annotations and labels into the pod's; None when the pod is gone."""
        meta = {k: v for k, v in (("annotations", annotations), ("labels", labels)) if v}
        answer = self._request(f"patch pod {namespace}/{name}", lambda **kw: self._core.patch_namespaced_pod(
            name=name, namespace=namespace, body={"metadata": meta}, **kw), accept={404}, fenced=True)
        return None if answer.status == 404 else answer.body

    @needs("create", "pods/eviction")
    def evict_pod(self, namespace: str, name: str, grace_period_s: int | None = None, uid: str | None = None) -> Answer:
        """Ask the Eviction API (policy/v1) to evict the pod, with `grace_period_s` as its
        deleteOptions.gracePeriodSeconds (None: the pod's own grace period) and `uid` as a
        precondition (the pod read, not one made since under its name). 201: accepted; 429:
        refused for now (a PodDisruptionBudget); 404: already gone; 409: another pod of that name."""
        preconditions = None if uid is None else self._models.V1Preconditions(uid=uid)
        options = None if grace_period_s is None and uid is None else \
            self._models.V1DeleteOptions(grace_period_seconds=grace_period_s, preconditions=preconditions)
        body = self._models.V1Eviction(metadata=self._models.V1ObjectMeta(name=name, namespace=namespace),
                                       delete_options=options)
        return self._request(f"evict pod {namespace}/{name}", lambda **kw: self._core.create_namespaced_pod_eviction(
            name=name, namespace=namespace, body=body, **kw), accept={404, 409, 429}, fenced=True)

    # -- composition: the CDI operator's ComposabilityRequests (cluster-scoped) ---------------------
    @needs("get", CRO_PLURAL, group=CRO_GROUP)
    def read_composability_request(self, name: str) -> dict | None:
        answer = self._request(f"get ComposabilityRequest {name}", lambda **kw: self._custom.get_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, name=name, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @needs("create", CRO_PLURAL, group=CRO_GROUP)
    def create_composability_request(self, body: dict, deadline_s: float) -> Answer:
        """201 created; 403 refused by the operator's webhook; 404 no such CRD; 409 the name is taken.
        A webhook that is down (500) is retried within `deadline_s`."""
        what = f"create ComposabilityRequest {body['metadata']['name']}"
        return self._admitted(what, self._request(what, lambda **kw: self._custom.create_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, body=body, **kw),
            accept={403, 404, 409, 422}, deadline_s=deadline_s, fenced=True))

    @needs("patch", CRO_PLURAL, group=CRO_GROUP)
    def patch_composability_request(self, name: str, patch: dict, deadline_s: float) -> Answer:
        """A JSON merge patch: 200 done; 403 refused by the operator's webhook; 404 gone."""
        what = f"patch ComposabilityRequest {name}"
        return self._admitted(what, self._request(what, lambda **kw: self._custom.patch_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, name=name, body=patch, **kw),
            accept={403, 404, 422}, deadline_s=deadline_s, fenced=True))

    @needs("delete", CRO_PLURAL, group=CRO_GROUP)
    def delete_composability_request(self, name: str) -> Answer:
        """200 or 202: the operator detaches its devices (Cleaning), then lets it go (Deleting); 404 gone."""
        return self._request(f"delete ComposabilityRequest {name}", lambda **kw: self._custom.delete_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, name=name, **kw), accept={404}, fenced=True)

    # -- the controller: its informer (LIST once, then WATCH), releases and Events ---------------
    def list_kind(self, kind: str) -> tuple[list[dict] | None, str]:
        """A LIST of one kind (KINDS) and its resourceVersion, at the first of its versions the
        cluster serves (remembered for its WATCH); None for a custom resource it does not serve."""
        row = KINDS[kind]
        for version in row.versions:
            items, resource_version = self._list_versioned(f"list {self._shown(row)}", self._lister(row, version),
                                                           missing_ok=row.served_maybe)
            if items is not None:
                self._served[kind] = version
                return items, resource_version
        return None, ""

    def watch(self, kind: str, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        """(type, object) events of one WATCH of `kind` (KINDS) from `resource_version`, at the
        version its LIST found served, with bookmarks, until the server ends it (at most
        `timeout_s`). A 410 raises WatchExpired (relist that kind); a stream that breaks raises
        ClusterUnavailable (resume it)."""
        row = KINDS[kind]
        return self._watch(f"watch {self._shown(row)}", self._lister(row, self._served.get(kind, row.version)),
                           resource_version, timeout_s)

    def _lister(self, row: Kind, version: str) -> Callable[..., Any]:
        """The kind's LIST (with watch=True, its WATCH): a core kind's own, else a custom
        resource's in all namespaces, at `version`."""
        if row.core is not None:
            return row.core(self._core, self.settings.namespace)
        return lambda **kw: self._custom.list_cluster_custom_object(group=row.group, version=version,
                                                                    plural=row.resource, **kw)

    def _shown(self, row: Kind) -> str:
        return f"{row.shown} in {self.settings.namespace}" if row.own_namespace else row.shown

    @needs("patch", "pods")
    def patch_pod_json(self, namespace: str, name: str, operations: list[dict]) -> Answer:
        """A JSON patch (RFC 6902) of a pod: 200 done; 404 gone; 409 or 422 a `test` failed or
        the API server refused the change (the pod changed since it was read)."""
        return self._request(f"patch pod {namespace}/{name}", lambda **kw: self._core.patch_namespaced_pod(
            name=name, namespace=namespace, body=operations, **kw), accept={404, 409, 422}, fenced=True)

    @needs("create", "events", group="events.k8s.io")
    def create_event(self, namespace: str, body: dict) -> Answer:
        """An events.k8s.io/v1 Event; best effort: 201, or the refusal."""
        return self._request(f"create Event in {namespace}", lambda **kw: self._events.create_namespaced_event(
            namespace=namespace, body=body, **kw), accept=_EVENT_REFUSALS, fenced=True)

    @needs("patch", "events", group="events.k8s.io")
    def patch_event(self, namespace: str, name: str, patch: dict) -> Answer:
        """A merge of `patch` into the Event (its series); 404 when it expired."""
        return self._request(f"patch Event {namespace}/{name}", lambda **kw: self._events.patch_namespaced_event(
            name=name, namespace=namespace, body=patch, **kw), accept=_EVENT_REFUSALS, fenced=True)

    def _lease_spec(self, spec: dict):
        def moment(text):
            return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)

        return self._models.V1LeaseSpec(holder_identity=spec.get("holderIdentity"),
                                        lease_duration_seconds=spec.get("leaseDurationSeconds"),
                                        acquire_time=moment(spec.get("acquireTime")),
                                        renew_time=moment(spec.get("renewTime")),
                                        lease_transitions=spec.get("leaseTransitions"))
