"""Every API call gpu-policy makes, one method each, through the real `kubernetes` client.

Kind to the API server (docs/kubernetes.md): LISTs are paginated (`limit`, following
`continue`; a `410 Gone` on a continue token restarts that list once), answers are read
as raw JSON (no per-object model building), `429` and `5xx` are retried after
`Retry-After` or with jittered doubling backoff within a deadline, and nothing but
gpu-policy's own errors leaves this module. Safe from the API server too (docs/security.md):
every answer is read bounded (bounded.py: a total deadline, a size cap after decompression,
bounded JSON nesting), a LIST takes at most `max_pages` pages within `list_deadline_s`,
whose tokens must advance and whose pages must bring items (`max_empty_pages`), and a
round sends at most `max_requests_per_round` requests. Each method declares the RBAC permission it needs
(`PERMISSIONS`); deploy/ grants exactly those, and a test checks both ways.

Only API that kubernetes client 30.x and 36.x (and 37.x) all have is used: the typed
API classes with keyword arguments, ``_preload_content=False`` and ``_request_timeout``.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from gpu_policy.errors import ClusterAccessDenied, ClusterError, ClusterUnavailable
from gpu_policy.kubernetes.transport.bounded import BodyRefused, BoundedBody, bounded_pool, parse_json, retry_after
from gpu_policy.kubernetes.names import (COSCHEDULING_GROUP, COSCHEDULING_VERSION, CRO_GROUP, CRO_PLURAL, CRO_VERSION,
                                         DRA_GROUP, DRA_VERSION, KAI_GROUP, KAI_PLURAL, KAI_POD_GROUP_VERSION,
                                         KAI_VERSION, POD_GROUPS, VOLCANO_GROUP, VOLCANO_VERSION)
from gpu_policy.kubernetes.settings import KubernetesSettings

#: finished pods hold nothing: the API server leaves them out
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
#: the custom kinds the controller watches only where the cluster serves them: kind -> (group, version, plural)
WATCHED_CUSTOM = {
    "resource_slices": (DRA_GROUP, DRA_VERSION, "resourceslices"),
    "resource_claims": (DRA_GROUP, DRA_VERSION, "resourceclaims"),
    "resource_claim_templates": (DRA_GROUP, DRA_VERSION, "resourceclaimtemplates"),
    "device_classes": (DRA_GROUP, DRA_VERSION, "deviceclasses"),
    "device_taint_rules": (DRA_GROUP, DRA_VERSION, "devicetaintrules"),
    "kai_pod_groups": (KAI_GROUP, KAI_POD_GROUP_VERSION, POD_GROUPS),
    "volcano_pod_groups": (VOLCANO_GROUP, VOLCANO_VERSION, POD_GROUPS),
    "coscheduling_pod_groups": (COSCHEDULING_GROUP, COSCHEDULING_VERSION, POD_GROUPS),
    "composability_requests": (CRO_GROUP, CRO_VERSION, CRO_PLURAL),
}
#: an Event write that fails is counted, never fatal (spec "Events": best effort)
_EVENT_REFUSALS = frozenset({400, 403, 404, 409, 422})


class WatchExpired(ClusterUnavailable):
    """A WATCH answered 410 Gone: its resourceVersion is too old; relist that kind."""


@dataclass(frozen=True)
class Permission:
    """One RBAC rule line: a verb on a resource; `own_namespace`: only in gpu-policy's
    namespace (a Role), else cluster-wide (a ClusterRole)."""

    verb: str
    group: str
    resource: str
    own_namespace: bool = False


PERMISSIONS: set[Permission] = set()


def _needs(verb: str, resource: str, group: str = "", own_namespace: bool = False,
           registry: set[Permission] = PERMISSIONS):
    """Declare the permission a client method uses (collected in `registry`: the controller's
    PERMISSIONS unless another account's, e.g. a pipeline step's, sends it)."""
    permission = Permission(verb, group, resource, own_namespace)
    registry.add(permission)

    def mark(method):
        method.permission = permission
        return method

    return mark


@dataclass
class ApiStats:
    """What the calls cost: requests sent (retries included), objects listed, bytes read."""

    calls: int = 0
    objects: int = 0
    bytes: int = 0

    def since(self, before: ApiStats) -> ApiStats:
        return ApiStats(self.calls - before.calls, self.objects - before.objects, self.bytes - before.bytes)


@dataclass
class Answer:
    """An API answer a caller handles itself (e.g. 404, 409, 429 on an eviction)."""

    status: int
    body: dict = field(default_factory=dict)
    retry_after: float | None = None

    @property
    def message(self) -> str:
        return str(self.body.get("message", "")).replace("\n", " ")[:300]

    @property
    def admission_denied(self) -> bool:
        """A 403 from an admission webhook (its rule refused the object), not from RBAC."""
        return self.status == 403 and self.message.startswith("admission webhook")


def in_cluster() -> bool:
    """Whether we run in a pod with a service account (k8s:// then uses it)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(f"{_SERVICE_ACCOUNT}/token")


def service_account_namespace() -> str:
    """The namespace of this pod's service account."""
    with open(f"{_SERVICE_ACCOUNT}/namespace") as f:
        return f.read().strip() or "default"


def connect(context: str | None, kubeconfig: str | None, where: str):
    """An ApiClient for the in-cluster service account (no context and no kubeconfig given,
    inside a pod), else for `context` (None: the current one) of `kubeconfig` (None:
    $KUBECONFIG or ~/.kube/config). Returns (api_client, default namespace)."""
    import yaml
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None  # read now: the client reads it at import
    try:
        if context is None and not kubeconfig and in_cluster():
            config.load_incluster_config(client_configuration=cfg)
            namespace = service_account_namespace()
        else:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
            chosen = next((c for c in contexts if c["name"] == context), active) if context else active
            namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
    except (ConfigException, OSError, yaml.YAMLError) as e:
        detail = " ".join(str(e).split())[:300]
        raise ClusterError(f"{where}: cannot load the Kubernetes configuration"
                           f"{f' {kubeconfig}' if kubeconfig else ''}: {detail}") from None
    cfg.retries = 0  # our own retries below: one place that bounds them and words the failure
    # the controller holds a WATCH per kind open (up to 14) beside its requests: a connection each, kept
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 32)
    return client.ApiClient(cfg), namespace


def _custom_watch(kind: str):
    """KubeClient's WATCH of one kind of WATCHED_CUSTOM, declaring its permission."""
    group, _, plural = WATCHED_CUSTOM[kind]

    @_needs("watch", plural, group=group)
    def watch(self, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        return self._watch_custom(kind, resource_version, timeout_s)

    watch.__name__ = f"watch_{kind}"
    return watch


class KubeClient:
    """The requests gpu-policy sends, each bounded, retried and worded the same way."""

    def __init__(self, api_client, where: str, settings: KubernetesSettings,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 jitter: Callable[[], float] = random.random):
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._coordination = client.CoordinationV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._events = client.EventsV1Api(api_client)
        self._models = client
        self.where = where
        self.settings = settings
        self.stats = ApiStats()
        self._sleep = sleep
        self._monotonic = monotonic
        self._jitter = jitter
        self._pool = bounded_pool(api_client)
        self._round_began = 0

    def begin_round(self) -> None:
        """Start counting a new round's requests against `max_requests_per_round`."""
        self._round_began = self.stats.calls

    def retry_wait(self, asked: float | None, backoff: float) -> float:
        """Seconds to wait before the next attempt: what the server asked (already clamped),
        else `backoff` jittered; never below the floor."""
        s = self.settings
        wait = asked if asked is not None else backoff * (1 + s.backoff_jitter * (2 * self._jitter() - 1))
        return max(wait, s.retry_floor_s)

    # -- reads of one observation --------------------------------------------------------------
    @_needs("list", "nodes")
    def list_nodes(self) -> list[dict]:
        return self._list("list nodes", self._core.list_node)

    @_needs("list", "pods")
    def list_pods(self) -> list[dict]:
        """Pods of all namespaces that are not finished."""
        return self._list("list pods", lambda **kw: self._core.list_pod_for_all_namespaces(
            field_selector=UNFINISHED_PODS, **kw))

    @_needs("list", "namespaces")
    def list_namespaces(self) -> list[dict]:
        return self._list("list namespaces", self._core.list_namespace)

    @_needs("list", KAI_PLURAL, group=KAI_GROUP)
    def list_kai_queues(self) -> list[dict] | None:
        """KAI-Scheduler's Queue objects; None when the cluster has no such resource."""
        return self._list("list KAI queues", lambda **kw: self._custom.list_cluster_custom_object(
            group=KAI_GROUP, version=KAI_VERSION, plural=KAI_PLURAL, **kw), missing_ok=True)

    @_needs("list", "resourceslices", group=DRA_GROUP)
    def list_resource_slices(self) -> list[dict] | None:
        """DRA ResourceSlices; None when the cluster has no resource.k8s.io/v1."""
        return self._list_dra("resourceslices")

    @_needs("list", "resourceclaims", group=DRA_GROUP)
    def list_resource_claims(self) -> list[dict] | None:
        """DRA ResourceClaims of all namespaces."""
        return self._list_dra("resourceclaims")

    @_needs("list", "resourceclaimtemplates", group=DRA_GROUP)
    def list_resource_claim_templates(self) -> list[dict] | None:
        return self._list_dra("resourceclaimtemplates")

    @_needs("list", "deviceclasses", group=DRA_GROUP)
    def list_device_classes(self) -> list[dict] | None:
        return self._list_dra("deviceclasses")

    @_needs("list", "devicetaintrules", group=DRA_GROUP)
    def list_device_taint_rules(self) -> list[dict] | None:
        """DeviceTaintRules (resource.k8s.io/v1 since Kubernetes 1.37); None when not served."""
        return self._list_dra("devicetaintrules")

    def _list_dra(self, plural: str) -> list[dict] | None:
        return self._list(f"list {plural}", self._all_of(DRA_GROUP, DRA_VERSION, plural), missing_ok=True)

    @_needs("list", POD_GROUPS, group=KAI_GROUP)
    def list_kai_pod_groups(self) -> list[dict] | None:
        """KAI-Scheduler's PodGroups in all namespaces; None when the cluster has no such resource."""
        return self._list_pod_groups(KAI_GROUP, KAI_POD_GROUP_VERSION)

    @_needs("list", POD_GROUPS, group=VOLCANO_GROUP)
    def list_volcano_pod_groups(self) -> list[dict] | None:
        return self._list_pod_groups(VOLCANO_GROUP, VOLCANO_VERSION)

    @_needs("list", POD_GROUPS, group=COSCHEDULING_GROUP)
    def list_coscheduling_pod_groups(self) -> list[dict] | None:
        return self._list_pod_groups(COSCHEDULING_GROUP, COSCHEDULING_VERSION)

    def _list_pod_groups(self, group: str, version: str) -> list[dict] | None:
        return self._list(f"list {group} PodGroups", self._all_of(group, version, POD_GROUPS), missing_ok=True)

    def _all_of(self, group: str, version: str, plural: str) -> Callable[..., Any]:
        """The LIST (or, with watch=True, the WATCH) of a custom resource in all namespaces."""
        return lambda **kw: self._custom.list_cluster_custom_object(group=group, version=version, plural=plural, **kw)

    @_needs("get", "configmaps", own_namespace=True)
    def read_config_map(self, name: str) -> dict | None:
        """The ConfigMap in gpu-policy's namespace; None when it does not exist."""
        ns = self.settings.namespace
        answer = self._request(f"get ConfigMap {ns}/{name}", lambda **kw: self._core.read_namespaced_config_map(
            name=name, namespace=ns, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    # -- writes ---------------------------------------------------------------------------------
    @_needs("create", "configmaps", own_namespace=True)
    def create_config_map(self, name: str, data: dict[str, str]) -> dict | None:
        """Create it; None when it already exists (someone was faster)."""
        ns = self.settings.namespace
        body = self._models.V1ConfigMap(metadata=self._models.V1ObjectMeta(name=name, namespace=ns), data=data)
        answer = self._request(f"create ConfigMap {ns}/{name}", lambda **kw: self._core.create_namespaced_config_map(
            namespace=ns, body=body, **kw), accept={409})
        return None if answer.status == 409 else answer.body

    @_needs("update", "configmaps", own_namespace=True)
    def replace_config_map(self, name: str, data: dict[str, str], resource_version: str) -> dict | None:
        """Replace it if it is still at `resource_version`; None on a conflict (409)."""
        ns = self.settings.namespace
        meta = self._models.V1ObjectMeta(name=name, namespace=ns, resource_version=resource_version)
        body = self._models.V1ConfigMap(metadata=meta, data=data)
        answer = self._request(f"update ConfigMap {ns}/{name}", lambda **kw: self._core.replace_namespaced_config_map(
            name=name, namespace=ns, body=body, **kw), accept={409})
        return None if answer.status == 409 else answer.body

    @_needs("get", "leases", group="coordination.k8s.io", own_namespace=True)
    def read_lease(self, name: str) -> dict | None:
        ns = self.settings.namespace
        answer = self._request(f"get Lease {ns}/{name}", lambda **kw: self._coordination.read_namespaced_lease(
            name=name, namespace=ns, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @_needs("create", "leases", group="coordination.k8s.io", own_namespace=True)
    def create_lease(self, name: str, spec: dict) -> dict | None:
        """Create it; None when it already exists."""
        ns = self.settings.namespace
        body = self._models.V1Lease(metadata=self._models.V1ObjectMeta(name=name, namespace=ns),
                                    spec=self._lease_spec(spec))
        answer = self._request(f"create Lease {ns}/{name}", lambda **kw: self._coordination.create_namespaced_lease(
            namespace=ns, body=body, **kw), accept={409})
        return None if answer.status == 409 else answer.body

    @_needs("update", "leases", group="coordination.k8s.io", own_namespace=True)
    def replace_lease(self, name: str, spec: dict, resource_version: str) -> dict | None:
        """Write it if it is still at `resource_version`; None when another holder wrote first."""
        ns = self.settings.namespace
        meta = self._models.V1ObjectMeta(name=name, namespace=ns, resource_version=resource_version)
        body = self._models.V1Lease(metadata=meta, spec=self._lease_spec(spec))
        answer = self._request(f"update Lease {ns}/{name}", lambda **kw: self._coordination.replace_namespaced_lease(
            name=name, namespace=ns, body=body, **kw), accept={409})
        return None if answer.status == 409 else answer.body

    @_needs("get", "pods")
    def read_pod(self, namespace: str, name: str) -> dict | None:
        answer = self._request(f"get pod {namespace}/{name}", lambda **kw: self._core.read_namespaced_pod(
            name=name, namespace=namespace, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @_needs("patch", "pods")
    def patch_pod_metadata(self, namespace: str, name: str, annotations: dict[str, str] | None = None,
                           labels: dict[str, str] | None = None) -> dict | None:
        """Merge annotations and labels into the pod's; None when the pod is gone."""
        meta = {k: v for k, v in (("annotations", annotations), ("labels", labels)) if v}
        answer = self._request(f"patch pod {namespace}/{name}", lambda **kw: self._core.patch_namespaced_pod(
            name=name, namespace=namespace, body={"metadata": meta}, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @_needs("create", "pods/eviction")
    def evict_pod(self, namespace: str, name: str) -> Answer:
        """Ask the Eviction API (policy/v1) to evict the pod with its own grace period.
        201: accepted; 429: refused for now (a PodDisruptionBudget); 404: already gone."""
        body = self._models.V1Eviction(metadata=self._models.V1ObjectMeta(name=name, namespace=namespace))
        return self._request(f"evict pod {namespace}/{name}", lambda **kw: self._core.create_namespaced_pod_eviction(
            name=name, namespace=namespace, body=body, **kw), accept={404, 429})

    # -- composition: the CDI operator's ComposabilityRequests (cluster-scoped) ---------------------
    @_needs("list", CRO_PLURAL, group=CRO_GROUP)
    def list_composability_requests(self) -> list[dict] | None:
        """Every ComposabilityRequest; None when the operator's CRD is not installed."""
        return self._list("list ComposabilityRequests", self._all_of(CRO_GROUP, CRO_VERSION, CRO_PLURAL), missing_ok=True)

    @_needs("get", CRO_PLURAL, group=CRO_GROUP)
    def read_composability_request(self, name: str) -> dict | None:
        answer = self._request(f"get ComposabilityRequest {name}", lambda **kw: self._custom.get_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, name=name, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @_needs("create", CRO_PLURAL, group=CRO_GROUP)
    def create_composability_request(self, body: dict, deadline_s: float) -> Answer:
        """201 created; 403 refused by the operator's webhook; 404 no such CRD; 409 the name is taken.
        A webhook that is down (500) is retried within `deadline_s`."""
        what = f"create ComposabilityRequest {body['metadata']['name']}"
        return self._admitted(what, self._request(what, lambda **kw: self._custom.create_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, body=body, **kw),
            accept={403, 404, 409, 422}, deadline_s=deadline_s))

    @_needs("patch", CRO_PLURAL, group=CRO_GROUP)
    def patch_composability_request(self, name: str, patch: dict, deadline_s: float) -> Answer:
        """A JSON merge patch: 200 done; 403 refused by the operator's webhook; 404 gone."""
        what = f"patch ComposabilityRequest {name}"
        return self._admitted(what, self._request(what, lambda **kw: self._custom.patch_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, name=name, body=patch, **kw),
            accept={403, 404, 422}, deadline_s=deadline_s))

    @_needs("delete", CRO_PLURAL, group=CRO_GROUP)
    def delete_composability_request(self, name: str) -> Answer:
        """200 or 202: the operator detaches its devices (Cleaning), then lets it go (Deleting); 404 gone."""
        return self._request(f"delete ComposabilityRequest {name}", lambda **kw: self._custom.delete_cluster_custom_object(
            group=CRO_GROUP, version=CRO_VERSION, plural=CRO_PLURAL, name=name, **kw), accept={404})

    # -- the controller: its informer (LIST once, then WATCH), releases and Events ---------------
    def list_watched(self, kind: str) -> tuple[list[dict] | None, str]:
        """A LIST of one watched kind (WATCHED) and its resourceVersion; None for a
        custom resource the cluster does not serve."""
        if kind in WATCHED_CUSTOM:
            group, version, plural = WATCHED_CUSTOM[kind]
            return self._list_versioned(f"list {plural}.{group}", self._all_of(group, version, plural), missing_ok=True)
        return getattr(self, f"list_{kind}_versioned")()

    def list_nodes_versioned(self) -> tuple[list[dict] | None, str]:
        return self._list_versioned("list nodes", self._core.list_node)

    def list_pods_versioned(self) -> tuple[list[dict] | None, str]:
        return self._list_versioned("list pods", lambda **kw: self._core.list_pod_for_all_namespaces(
            field_selector=UNFINISHED_PODS, **kw))

    def list_namespaces_versioned(self) -> tuple[list[dict] | None, str]:
        return self._list_versioned("list namespaces", self._core.list_namespace)

    @_needs("list", "configmaps", own_namespace=True)
    def list_config_maps_versioned(self) -> tuple[list[dict] | None, str]:
        """gpu-policy's own ConfigMaps (queues, reservations, composable)."""
        ns = self.settings.namespace
        return self._list_versioned(f"list ConfigMaps in {ns}", lambda **kw: self._core.list_namespaced_config_map(
            namespace=ns, **kw))

    def list_kai_queues_versioned(self) -> tuple[list[dict] | None, str]:
        return self._list_versioned("list KAI queues", lambda **kw: self._custom.list_cluster_custom_object(
            group=KAI_GROUP, version=KAI_VERSION, plural=KAI_PLURAL, **kw), missing_ok=True)

    def watch(self, kind: str, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        """(type, object) events of one WATCH of `kind` from `resource_version`, with
        bookmarks, until the server ends it (at most `timeout_s`). A 410 raises WatchExpired
        (relist that kind); a stream that breaks raises ClusterUnavailable (resume it)."""
        return getattr(self, f"watch_{kind}")(resource_version, timeout_s)

    @_needs("watch", "nodes")
    def watch_nodes(self, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        return self._watch("watch nodes", self._core.list_node, resource_version, timeout_s)

    @_needs("watch", "pods")
    def watch_pods(self, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        return self._watch("watch pods", lambda **kw: self._core.list_pod_for_all_namespaces(
            field_selector=UNFINISHED_PODS, **kw), resource_version, timeout_s)

    @_needs("watch", "namespaces")
    def watch_namespaces(self, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        return self._watch("watch namespaces", self._core.list_namespace, resource_version, timeout_s)

    @_needs("watch", "configmaps", own_namespace=True)
    def watch_config_maps(self, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        ns = self.settings.namespace
        return self._watch(f"watch ConfigMaps in {ns}", lambda **kw: self._core.list_namespaced_config_map(
            namespace=ns, **kw), resource_version, timeout_s)

    @_needs("watch", KAI_PLURAL, group=KAI_GROUP)
    def watch_kai_queues(self, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        return self._watch("watch KAI queues", lambda **kw: self._custom.list_cluster_custom_object(
            group=KAI_GROUP, version=KAI_VERSION, plural=KAI_PLURAL, **kw), resource_version, timeout_s)

    # the DRA kinds, PodGroups and ComposabilityRequests (WATCHED_CUSTOM): a method each, to declare its permission
    watch_resource_slices = _custom_watch("resource_slices")
    watch_resource_claims = _custom_watch("resource_claims")
    watch_resource_claim_templates = _custom_watch("resource_claim_templates")
    watch_device_classes = _custom_watch("device_classes")
    watch_device_taint_rules = _custom_watch("device_taint_rules")
    watch_kai_pod_groups = _custom_watch("kai_pod_groups")
    watch_volcano_pod_groups = _custom_watch("volcano_pod_groups")
    watch_coscheduling_pod_groups = _custom_watch("coscheduling_pod_groups")
    watch_composability_requests = _custom_watch("composability_requests")

    def _watch_custom(self, kind: str, resource_version: str, timeout_s: float) -> Iterator[tuple[str, dict]]:
        group, version, plural = WATCHED_CUSTOM[kind]
        return self._watch(f"watch {plural}.{group}", self._all_of(group, version, plural), resource_version, timeout_s)

    @_needs("patch", "pods")
    def patch_pod_json(self, namespace: str, name: str, operations: list[dict]) -> Answer:
        """A JSON patch (RFC 6902) of a pod: 200 done; 404 gone; 409 or 422 a `test` failed or
        the API server refused the change (the pod changed since it was read)."""
        return self._request(f"patch pod {namespace}/{name}", lambda **kw: self._core.patch_namespaced_pod(
            name=name, namespace=namespace, body=operations, **kw), accept={404, 409, 422})

    @_needs("create", "events", group="events.k8s.io")
    def create_event(self, namespace: str, body: dict) -> Answer:
        """An events.k8s.io/v1 Event; best effort: 201, or the refusal."""
        return self._request(f"create Event in {namespace}", lambda **kw: self._events.create_namespaced_event(
            namespace=namespace, body=body, **kw), accept=_EVENT_REFUSALS)

    @_needs("patch", "events", group="events.k8s.io")
    def patch_event(self, namespace: str, name: str, patch: dict) -> Answer:
        """A merge of `patch` into the Event (its series); 404 when it expired."""
        return self._request(f"patch Event {namespace}/{name}", lambda **kw: self._events.patch_namespaced_event(
            name=name, namespace=namespace, body=patch, **kw), accept=_EVENT_REFUSALS)

    def _watch(self, what: str, call: Callable[..., Any], resource_version: str,
               timeout_s: float) -> Iterator[tuple[str, dict]]:
        """One WATCH: the official client builds and sends the request (`watch=True`, raw
        stream); its events are read through the bounded reader, each line under the size
        cap and parsed with bounded nesting, the stream within `timeout_s` plus the request
        timeout (the API server ends it at `timeout_s`)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        self.stats.calls += 1
        window = self.settings.timeout_s
        try:
            response = call(watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
                            timeout_seconds=max(1, int(timeout_s)), _preload_content=False,
                            _request_timeout=(window, timeout_s + window))
        except ApiException as e:
            answer = _answer_of(e, self.settings)
            if answer.status == 410:
                raise WatchExpired(f"{self.where}: {what}: {answer.message or '410 Gone'}") from None
            if answer.status in (401, 403):
                raise self._denied(what, answer) from None
            raise ClusterUnavailable(f"{self.where}: {what}: the API server answered {answer.status}"
                                     f"{': ' + answer.message if answer.message else ''}") from None
        except (HTTPError, OSError) as e:
            raise ClusterUnavailable(f"{self.where}: {what}: the API server is unreachable ({_cause(e)})") from None
        body = BoundedBody(response, time.monotonic() + timeout_s + window, self.settings.max_response_bytes)
        try:
            for line in body.lines():
                self.stats.bytes += len(line)
                yield _watch_event(what, self.where, parse_json(line))
        except BodyRefused as e:
            raise ClusterUnavailable(f"{self.where}: {what}: {e.reason}") from None
        except (HTTPError, OSError) as e:
            raise ClusterUnavailable(f"{self.where}: {what}: the stream broke ({_cause(e)})") from None
        finally:
            response.release_conn()

    def _admitted(self, what: str, answer: Answer) -> Answer:
        """A 403 that RBAC gave (not the webhook) is ClusterAccessDenied, as for every request."""
        if answer.status == 403 and not answer.admission_denied:
            raise self._denied(what, answer)
        return answer

    # -- plumbing -------------------------------------------------------------------------------
    def _lease_spec(self, spec: dict):
        def moment(text):
            return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)

        return self._models.V1LeaseSpec(holder_identity=spec.get("holderIdentity"),
                                        lease_duration_seconds=spec.get("leaseDurationSeconds"),
                                        acquire_time=moment(spec.get("acquireTime")),
                                        renew_time=moment(spec.get("renewTime")),
                                        lease_transitions=spec.get("leaseTransitions"))

    def _list(self, what: str, call: Callable[..., Any], missing_ok: bool = False) -> list[dict] | None:
        """Every item of a paginated LIST; a 410 on a continue token restarts it once."""
        return self._list_versioned(what, call, missing_ok)[0]

    def _list_versioned(self, what: str, call: Callable[..., Any],
                        missing_ok: bool = False) -> tuple[list[dict] | None, str]:
        """`_list`, and the list's resourceVersion (where a WATCH of it starts)."""
        s = self.settings
        items: list[dict] = []
        token, restarted, seen, empty = None, False, set(), 0
        ends = self._monotonic() + s.list_deadline_s
        while True:
            if len(seen) >= s.max_pages:
                raise ClusterUnavailable(f"{self.where}: {what}: the list has more than {s.max_pages} pages "
                                         "(max_pages); is the API server handing out continue tokens forever?")
            left = ends - self._monotonic()
            if left <= 0:
                raise ClusterUnavailable(f"{self.where}: {what}: the list took longer than {s.list_deadline_s:g} s "
                                         f"(list_deadline_s) and was cut off after {len(seen) + 1} pages")
            page = {"limit": s.page_size, **({"_continue": token} if token else {})}
            accept = {410} if token else ({404} if missing_ok else set())
            answer = self._request(what, lambda **kw: call(**page, **kw), accept=accept,
                                   deadline_s=min(s.deadline_s, left))
            if answer.status == 404:
                return None, ""
            if answer.status == 410:
                if restarted:
                    raise ClusterUnavailable(f"{self.where}: {what}: the continue token expired twice (410 Gone); "
                                             "the list changes faster than it can be read")
                items, token, restarted, seen, empty = [], None, True, set(), 0
                continue
            got = answer.body.get("items")
            if not isinstance(got, list):
                raise ClusterUnavailable(f"{self.where}: {what}: the answer has no list of items")
            items.extend(got)
            self.stats.objects += len(got)
            empty = 0 if got else empty + 1
            metadata = answer.body.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            token = metadata.get("continue")
            if not token:
                version = metadata.get("resourceVersion")
                return items, version if isinstance(version, str) else ""
            if not isinstance(token, str) or token in seen:
                raise ClusterUnavailable(f"{self.where}: {what}: the API server's continue token does not advance "
                                         f"(page {len(seen) + 1} gave one it gave before or no string)")
            if empty >= s.max_empty_pages:
                raise ClusterUnavailable(f"{self.where}: {what}: {empty} pages in a row had no items yet a continue "
                                         "token (max_empty_pages); the API server's list makes no progress")
            seen.add(token)

    def _request(self, what: str, call: Callable[..., Any], accept: set[int] = frozenset(),
                 deadline_s: float | None = None) -> Answer:
        """Send one request, retrying 429, 5xx and unreachable within the deadline
        (`deadline_s`, else the settings')."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        s = self.settings
        deadline_s = s.deadline_s if deadline_s is None else deadline_s
        deadline = self._monotonic() + deadline_s
        backoff, attempts = s.backoff_s, 0
        while True:
            if self.stats.calls - self._round_began >= s.max_requests_per_round:
                raise ClusterUnavailable(f"{self.where}: {what}: this round already sent {s.max_requests_per_round} "
                                         "requests (max_requests_per_round); the rest waits for the next round")
            attempts += 1
            self.stats.calls += 1
            wait = None
            window = max(min(s.timeout_s, deadline - self._monotonic()), 0.001)
            self._pool.within(time.monotonic() + window, s.max_response_bytes)
            try:
                response = call(_preload_content=False, _request_timeout=(window, window))
                data = response.data
            except BodyRefused as e:
                raise ClusterUnavailable(f"{self.where}: {what}: {e.reason}") from None
            except ApiException as e:
                answer = _answer_of(e, s)
                if answer.status in accept:
                    return answer
                if answer.status in (401, 403):
                    raise self._denied(what, answer) from None
                if answer.status != 429 and answer.status < 500:
                    raise ClusterError(f"{self.where}: {what}: the API server answered {answer.status}"
                                       f"{': ' + answer.message if answer.message else ''}") from None
                problem, wait = f"answered {answer.status}{': ' + answer.message if answer.message else ''}", \
                    answer.retry_after
            except HTTPError as e:
                problem = f"is unreachable ({_cause(e)})"
            else:
                self.stats.bytes += len(data)
                try:
                    body = parse_json(data)
                except BodyRefused as e:
                    raise ClusterUnavailable(f"{self.where}: {what}: {e.reason}") from None
                return Answer(response.status, body if isinstance(body, dict) else {})
            wait = self.retry_wait(wait, backoff)
            backoff *= 2
            if self._monotonic() + wait > deadline:
                raise ClusterUnavailable(f"{self.where}: {what}: the API server {problem}; gave up after "
                                         f"{attempts} attempt{'s' if attempts > 1 else ''} within {deadline_s:g} s")
            self._sleep(wait)

    def _denied(self, what: str, answer: Answer) -> ClusterAccessDenied:
        return ClusterAccessDenied(f"{self.where}: {what}: refused ({answer.status}): {answer.message}; "
                                   "grant the permissions in deploy/ (docs/kubernetes.md)")


def _watch_event(what: str, where: str, event: Any) -> tuple[str, dict]:
    """(type, object) of one watch event; an ERROR event is raised (410: WatchExpired)."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ClusterUnavailable(f"{where}: {what}: a watch event is not an object with a type")
    obj = event.get("object") if isinstance(event.get("object"), dict) else {}
    if event["type"] == "ERROR":
        code, message = obj.get("code"), str(obj.get("message") or "")[:300]
        if code == 410:
            raise WatchExpired(f"{where}: {what}: {message or '410 Gone'}")
        raise ClusterUnavailable(f"{where}: {what}: the watch ended with an error ({code}: {message})")
    return event["type"], obj


def _answer_of(e, settings: KubernetesSettings) -> Answer:
    """A refusal's status, body (its bounded bytes) and clamped Retry-After."""
    raw = e.body if isinstance(e.body, bytes) else (e.body or "").encode()
    try:
        body = parse_json(raw)
    except BodyRefused:
        body = {"message": raw[:300].decode("utf-8", "replace")}
    headers = e.headers or {}
    asked = retry_after(headers.get("Retry-After"), settings.retry_floor_s, settings.retry_ceiling_s)
    return Answer(e.status or 0, body if isinstance(body, dict) else {}, asked)


def _cause(e: BaseException) -> str:
    """The root of a urllib3 error in a few words."""
    text = str(getattr(e, "reason", None) or e)
    for marker in ("Connection refused", "timed out", "Name or service not known", "No route to host",
                   "certificate verify failed"):
        if marker.lower() in text.lower():
            return marker.lower()
    return type(getattr(e, "reason", None) or e).__name__
