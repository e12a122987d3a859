"""The fake API server's store, lifetime and test hooks: `FakeKubernetes`.

Every change to the store goes through `_write` or `_remove`, which stamp a new
resourceVersion, keep the change in the resource's watch history and wake the watchers.
"""

from __future__ import annotations

import copy
import itertools
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from typing import Iterator

from tests.serving import serve_in_thread

from .watch import Change, History

TOKEN = "gpu-policy-test-token"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str  # the version objects are stored at (a request's route carries the version it asked for)
    plural: str
    kind: str
    namespaced: bool
    status: bool = False  # a custom resource with the status subresource: /status writes status only
    also: tuple[str, ...] = ()  # other versions served, of the same schema (a CRD's `served` versions)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def served(self) -> tuple[str, ...]:
        return (self.version, *self.also)


BUILTIN = [
    Resource("", "v1", "nodes", "Node", False),
    Resource("", "v1", "namespaces", "Namespace", False),
    Resource("", "v1", "pods", "Pod", True),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("events.k8s.io", "v1", "events", "Event", True),
    Resource("scheduling.run.ai", "v2", "queues", "Queue", False),
]


@dataclass
class Request:
    method: str
    path: str
    query: dict
    status: int
    bytes: int
    verb: str
    resource: str  # group/plural[/subresource], e.g. "/pods", "coordination.k8s.io/leases"


@dataclass
class Fault:
    status: int
    method: str | None
    path: str | None  # a regular expression matched against the whole path
    with_continue: bool | None
    times: int | None  # None: for ever
    retry_after: float | None
    message: str


@dataclass
class _Block:
    times: int | None
    retry_after: float | None


def now_rfc3339(t: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if t is None else t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Server(ThreadingHTTPServer):
    """A client that hangs up (a watch it stopped reading, a controller shut down) is what API
    servers see every day: no traceback for it; anything else is reported as the stdlib does."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeKubernetes:
    """The server and its store. Objects are plain API JSON (camelCase dicts).

    `history`: changes kept per resource for watches (older versions answer 410);
    `bookmark_interval_s`: how often a watch that allows bookmarks gets one (None: only on
    `send_bookmarks()`)."""

    def __init__(self, page_ttl_s: float | None = None, history: int = 1000, bookmark_interval_s: float | None = 60.0):
        self.resources = {(r.group, r.plural): r for r in BUILTIN}
        self._store: dict[tuple[str, str, str, str], dict] = {}
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._rv = itertools.count(1)
        self._version = next(self._rv)  # as etcd's revision, never 0: a watch from "0" means "from now, with state"
        self._snapshots: dict[str, tuple[list[dict], float, int]] = {}  # id -> (items, made at, version)
        self._created = itertools.count(1)
        self.creation_order: dict[tuple[str, str, str, str], int] = {}  # key -> when it was created, in turns
        self.page_ttl_s = page_ttl_s
        self.history = history
        self.bookmark_interval_s = bookmark_interval_s
        self._histories: dict[tuple[str, str], History] = {}
        self._watchers: list = []
        self._bookmark_seq = self._drop_seq = 0
        self._drop_abrupt = False
        self._expire_seqs: dict[tuple[str, str], int] = {}
        self._stopping = False
        #: the MutatingAdmissionPolicy of deploy/: gate GPU pods created in managed namespaces
        self.gate_gpu_pods = False
        self.faults: list[Fault] = []
        self.forbidden: set[tuple[str, str]] = set()
        self.blocks: dict[tuple[str, str], _Block] = {}
        self.requests: list[Request] = []
        self.evictions: list[tuple[str, str]] = []  # (namespace, pod) in the order they succeeded
        self.patches: list[tuple[str, str, dict | list]] = []  # (namespace, pod, patch body) of pods
        self.on_eviction = None  # called with (namespace, name) after each accepted eviction
        #: called with (the change: ADDED, MODIFIED or DELETED, the object as stored) after each change to
        #: the store, under its lock (a benchmark's stand-in scheduler: it must not block)
        self.on_change = None
        self.on_pod_patch = None  # called with (namespace, name, patch body) after each pod PATCH stored
        #: (group, plural) -> f(method, obj) before a create or update is stored: None admits it,
        #: (status, message) refuses it, as a validating admission webhook does
        self.admission: dict[tuple[str, str], object] = {}
        #: (group, plural) -> f() after each GET or LIST of that resource is answered: a controller's turn
        self.after_read: dict[tuple[str, str], object] = {}
        #: seconds every request but a watch waits before it is served (an API server under load, or
        #: API Priority and Fairness queueing); each connection is served by its own thread, so
        #: requests sent side by side wait side by side
        self.latency_s = 0.0
        self.peak_in_flight = 0  # the most requests (watches aside) served at once
        self._in_flight = 0
        self._server: ThreadingHTTPServer | None = None

    # -- lifetime --------------------------------------------------------------------------------
    def start(self) -> FakeKubernetes:
        from .handler import Handler

        api = self

        class Bound(Handler):
            fake = api

        self._stopping = False
        self._server = _Server(("127.0.0.1", 0), Bound)
        self._server.daemon_threads = True
        serve_in_thread(self._server, "fake-kube-apiserver")
        return self

    def stop(self) -> None:
        """Stop serving; open watch streams end."""
        if self._server is not None:
            with self._cond:
                self._stopping = True
                self._cond.notify_all()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeKubernetes:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self, path, contexts: tuple[str, ...] = ("fake",), namespace: str | None = None) -> str:
        """Write a kubeconfig with one context per name, all pointing here; return its path."""
        import yaml

        ctx = [{"name": c, "context": {"cluster": "fake", "user": "tester",
                                        **({"namespace": namespace} if namespace else {})}} for c in contexts]
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": contexts[0],
               "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
               "users": [{"name": "tester", "user": {"token": TOKEN}}], "contexts": ctx}
        with open(path, "w") as f:
            yaml.safe_dump(doc, f)
        return str(path)

    # -- the store, for tests --------------------------------------------------------------------
    def add_resource(self, group: str, version: str, plural: str, kind: str, namespaced: bool,
                     status: bool = False, also: tuple[str, ...] = ()) -> None:
        """Serve a custom resource (any group/version/plural); with `status`, its status
        subresource (as a CRD's `subresources.status`: writes of the object leave its status as
        it was, writes of /status change nothing else); `also`: other versions it is served at,
        objects stored at `version` (a path at a version not served answers 404)."""
        self.resources[(group, plural)] = Resource(group, version, plural, kind, namespaced, status, also)

    def put(self, obj: dict) -> dict:
        """Create or overwrite an object as a controller would (no admission); returns the stored copy."""
        res = self._resource_of(obj)
        meta = obj.setdefault("metadata", {})
        with self._lock:
            key = (res.group, res.plural, meta.get("namespace", "") if res.namespaced else "", meta["name"])
            return copy.deepcopy(self._write(res, key, copy.deepcopy(obj)))

    def create(self, obj: dict) -> dict:
        """Create an object as a client's POST would, through admission (the admission policy,
        validation, webhooks), e.g. a pod a stand-in controller makes; ValueError when refused."""
        from . import crud

        res = self._resource_of(obj)
        with self._lock:
            code, body, _ = crud.handle(self, "POST", {}, obj, (res, obj["metadata"].get("namespace", ""), "", ""),
                                        "application/json")
        if code != 201:
            raise ValueError(body["message"])
        return copy.deepcopy(body)

    def get(self, plural: str, name: str, namespace: str = "", group: str = "") -> dict | None:
        with self._lock:
            obj = self._store.get((group, plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def objects(self, plural: str, namespace: str | None = None, group: str = "") -> list[dict]:
        with self._lock:
            return [copy.deepcopy(o) for (g, p, ns, _), o in sorted(self._store.items())
                    if g == group and p == plural and (namespace is None or ns == namespace)]

    def delete(self, plural: str, name: str, namespace: str = "", group: str = "") -> None:
        with self._lock:
            self._remove((group, plural, namespace, name))

    def finish_terminating(self) -> list[str]:
        """What the kubelet does when the grace period ends: pods being deleted go away."""
        gone = []
        with self._lock:
            for key, pod in list(self._store.items()):
                if key[1] == "pods" and pod["metadata"].get("deletionTimestamp"):
                    self._remove(key)
                    gone.append(f"{key[2]}/{key[3]}")
        return gone

    def bind(self, namespace: str, name: str, node: str) -> None:
        """What the scheduler does: bind a pending pod to a node, and it runs. A pod that still
        has scheduling gates cannot be bound (ValueError)."""
        with self._lock:
            key = ("", "pods", namespace, name)
            pod = copy.deepcopy(self._store[key])
            if pod.get("spec", {}).get("schedulingGates"):
                raise ValueError(f"pod {namespace}/{name} has non-empty .spec.schedulingGates")
            pod["spec"]["nodeName"] = node
            pod.setdefault("status", {})["phase"] = "Running"
            self._write(self.resources[("", "pods")], key, pod)

    # -- watches, for tests -----------------------------------------------------------------------
    def send_bookmarks(self) -> None:
        """Every open watch that allows bookmarks gets one now."""
        with self._cond:
            self._bookmark_seq += 1
            self._cond.notify_all()

    def drop_watches(self, abrupt: bool = False) -> None:
        """End every open watch stream: cleanly (the last chunk sent), or `abrupt`ly (the
        connection closed mid-stream, as when an API server restarts)."""
        with self._cond:
            self._drop_seq += 1
            self._drop_abrupt = abrupt
            self._cond.notify_all()

    def expire_history(self, plural: str, group: str = "") -> None:
        """Forget the resource's changes (a compaction): its open watches get a 410 ERROR event
        and end, and a watch from any version before now answers 410."""
        with self._cond:
            self._history_of(self.resources[(group, plural)]).expire(self._version)
            self._expire_seqs[(group, plural)] = self._expire_seqs.get((group, plural), 0) + 1
            self._cond.notify_all()

    def watch_connections(self, plural: str | None = None, group: str = "") -> int:
        """WATCH requests served so far (of one resource when `plural` is given)."""
        return sum(1 for r in self.requests if r.verb == "watch"
                   and (plural is None or r.resource == f"{group}/{plural}"))

    def open_watches(self, plural: str | None = None, group: str = "") -> int:
        """Watch streams open now (of one resource when `plural` is given)."""
        with self._lock:
            return sum(1 for w in self._watchers if plural is None or w.key == (group, plural))

    def await_watches(self, count: int, plural: str | None = None, group: str = "", timeout_s: float = 30.0) -> None:
        """Block until `count` watch streams (of one resource when `plural` is given) are open;
        TimeoutError after a generous `timeout_s`, so a test never hangs."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.open_watches(plural, group) >= count, timeout_s):
                raise TimeoutError(f"{count} watches of {plural or 'anything'} not open after {timeout_s} s")

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Serve one request (not a watch): wait `latency_s`, count it in flight meanwhile."""
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            if self.latency_s:
                time.sleep(self.latency_s)
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    # -- faults -----------------------------------------------------------------------------------
    def inject(self, status: int, *, method: str | None = None, path: str | None = None,
               with_continue: bool | None = None, times: int | None = 1, retry_after: float | None = None,
               message: str = "injected by the test") -> None:
        """Answer the next `times` matching requests with `status` (None: every one)."""
        self.faults.append(Fault(status, method, path, with_continue, times, retry_after, message))

    def forbid(self, verb: str, resource: str, group: str = "") -> None:
        """RBAC: refuse `verb` on `resource` (e.g. "list", "pods") with 403."""
        self.forbidden.add((verb, f"{group}/{resource}"))

    def block_eviction(self, namespace: str, name: str, times: int | None = None,
                       retry_after: float | None = None) -> None:
        """A PodDisruptionBudget refuses the next `times` evictions of the pod (None: always)."""
        self.blocks[(namespace, name)] = _Block(times, retry_after)

    def expire_continue_tokens(self) -> None:
        with self._lock:
            self._snapshots.clear()

    # -- the log ----------------------------------------------------------------------------------
    def calls(self, path: str = "", method: str | None = None, exact: bool = True) -> int:
        """Requests to `path` (or below it, with exact=False), of `method` when given."""
        return sum(1 for r in self.requests if (r.path == path if exact else r.path.startswith(path))
                   and (method is None or r.method == method))

    def permissions_used(self) -> set[tuple[str, str, str]]:
        """(verb, group, resource) of every request, as RBAC names them."""
        out = set()
        for r in self.requests:
            group, _, resource = r.resource.partition("/")
            out.add((r.verb, group, resource))
        return out

    def reset_log(self) -> None:
        self.requests.clear()

    # -- internals --------------------------------------------------------------------------------
    def _resource_of(self, obj: dict) -> Resource:
        api_version, kind = obj.get("apiVersion", "v1"), obj["kind"]
        group = api_version.rpartition("/")[0]
        for r in self.resources.values():
            if r.group == group and r.kind == kind:
                return r
        raise KeyError(f"no resource for {api_version} {kind}")

    def _history_of(self, res: Resource) -> History:
        return self._histories.setdefault((res.group, res.plural), History(self.history))

    def _write(self, res: Resource, key: tuple, obj: dict) -> dict:
        """Store `obj` (a fresh dict, never changed afterwards) under `key`: a new version, a
        watch event. Returns the stored object (the caller's copy)."""
        old = self._store.get(key)
        meta = obj.setdefault("metadata", {})
        self._version = next(self._rv)
        meta["resourceVersion"] = str(self._version)
        meta.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", (old or {}).get("metadata", {}).get("creationTimestamp") or now_rfc3339())
        obj["apiVersion"], obj["kind"] = self.resources[(res.group, res.plural)].api_version, res.kind  # stored at
        if old is None:
            self.creation_order[key] = next(self._created)
        self._store[key] = obj
        self._history_of(res).append(Change(self._version, "MODIFIED" if old else "ADDED", old, obj))
        self._cond.notify_all()
        if self.on_change is not None:
            self.on_change("MODIFIED" if old else "ADDED", obj)
        return obj

    def _remove(self, key: tuple) -> None:
        """Take the object at `key` out of the store: a new version, a DELETED watch event."""
        old = self._store.pop(key, None)
        self._version = next(self._rv)
        if old is None:
            return
        self.creation_order.pop(key, None)
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self._version)
        self._history_of(self.resources[key[:2]]).append(Change(self._version, "DELETED", old, gone))
        self._cond.notify_all()
        if self.on_change is not None:
            self.on_change("DELETED", gone)
