"""A small Kubernetes API server for the tests: the real `kubernetes` client talks to it.

Stdlib `ThreadingHTTPServer` on 127.0.0.1, port 0. It speaks the API's JSON for the
resources gpu-policy reads and writes, and any custom resource registered with
`add_resource` (any group/version/plural, cluster-scoped or namespaced):

- LIST with `limit` and `continue` (a consistent snapshot per list; tokens can be
  expired, then a continue answers 410), `resourceVersion`, `fieldSelector` and
  `labelSelector` (`=`, `==`, `!=`, `key`, `!key`);
- GET, POST (409 when it exists), PUT and PATCH (JSON merge patch; 409 when the body
  carries a stale `metadata.resourceVersion`), DELETE;
- `pods/eviction` (201; 429 while a disruption budget blocks, with or without
  Retry-After; the evicted pod gets a deletionTimestamp and a DisruptionTarget condition);
- injected faults (`inject`: any status, e.g. 429 with Retry-After, 500, 410) and RBAC
  refusals (`forbid`: 403 for a verb on a resource);
- finalizers: a DELETE of an object that has some only sets its `deletionTimestamp`;
- controllers and admission webhooks of a resource (`admission`, `after_read`), e.g. the CDI
  operator of tests/kubernetes/fake_cdi.py;
- a request log (`requests`, `calls`), from which tests read what an observation cost,
  and `permissions_used`: the (verb, group, resource) of every request.

It is a test helper, not shipped; `with FakeKubernetes() as api:` stops it on exit.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TOKEN = "gpu-policy-test-token"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


BUILTIN = [
    Resource("", "v1", "nodes", "Node", False),
    Resource("", "v1", "namespaces", "Namespace", False),
    Resource("", "v1", "pods", "Pod", True),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
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


class FakeKubernetes:
    """The server and its store. Objects are plain API JSON (camelCase dicts)."""

    def __init__(self, page_ttl_s: float | None = None):
        self.resources = {(r.group, r.plural): r for r in BUILTIN}
        self._store: dict[tuple[str, str, str, str], dict] = {}
        self._lock = threading.RLock()
        self._rv = itertools.count(1)
        self._version = 0
        self._snapshots: dict[str, tuple[list[dict], float, int]] = {}  # id -> (items, made at, version)
        self.page_ttl_s = page_ttl_s
        self.faults: list[Fault] = []
        self.forbidden: set[tuple[str, str]] = set()
        self.blocks: dict[tuple[str, str], _Block] = {}
        self.requests: list[Request] = []
        self.evictions: list[tuple[str, str]] = []  # (namespace, pod) in the order they succeeded
        self.patches: list[tuple[str, str, dict]] = []  # (namespace, pod, patch) of pods
        self.on_eviction = None  # called with (namespace, name) after each accepted eviction
        #: (group, plural) -> f(method, obj) before a create or update is stored: None admits it,
        #: (status, message) refuses it, as a validating admission webhook does
        self.admission: dict[tuple[str, str], object] = {}
        #: (group, plural) -> f() after each GET or LIST of that resource is answered: a controller's turn
        self.after_read: dict[tuple[str, str], object] = {}
        self._server: ThreadingHTTPServer | None = None

    # -- lifetime --------------------------------------------------------------------------------
    def start(self) -> FakeKubernetes:
        api = self

        class Handler(_Handler):
            fake = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-kube-apiserver", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
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
    def add_resource(self, group: str, version: str, plural: str, kind: str, namespaced: bool) -> None:
        """Serve a custom resource (any group/version/plural)."""
        self.resources[(group, plural)] = Resource(group, version, plural, kind, namespaced)

    def put(self, obj: dict) -> dict:
        """Create or overwrite an object as a controller would; returns the stored copy."""
        res = self._resource_of(obj)
        meta = obj.setdefault("metadata", {})
        with self._lock:
            key = (res.group, res.plural, meta.get("namespace", "") if res.namespaced else "", meta["name"])
            old = self._store.get(key)
            stored = self._stamp(copy.deepcopy(obj), res, old)
            self._store[key] = stored
            return copy.deepcopy(stored)

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
            self._store.pop((group, plural, namespace, name), None)
            self._version = next(self._rv)

    def finish_terminating(self) -> list[str]:
        """What the kubelet does when the grace period ends: pods being deleted go away."""
        gone = []
        with self._lock:
            for key, pod in list(self._store.items()):
                if key[1] == "pods" and pod["metadata"].get("deletionTimestamp"):
                    del self._store[key]
                    gone.append(f"{key[2]}/{key[3]}")
            self._version = next(self._rv)
        return gone

    def bind(self, namespace: str, name: str, node: str) -> None:
        """What the scheduler does: bind a pending pod to a node, and it runs."""
        with self._lock:
            key = ("", "pods", namespace, name)
            pod = copy.deepcopy(self._store[key])
            pod["spec"]["nodeName"] = node
            pod.setdefault("status", {})["phase"] = "Running"
            self._store[key] = self._stamp(pod, self.resources[("", "pods")], pod)

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

    def _stamp(self, obj: dict, res: Resource, old: dict | None) -> dict:
        meta = obj.setdefault("metadata", {})
        self._version = next(self._rv)
        meta["resourceVersion"] = str(self._version)
        meta.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", (old or {}).get("metadata", {}).get("creationTimestamp") or now_rfc3339())
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        return obj


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKubernetes
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # headers and body leave in one write: no Nagle / delayed-ACK stall on keep-alive

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self): self._serve("GET")  # noqa: E704
    def do_POST(self): self._serve("POST")  # noqa: E704
    def do_PUT(self): self._serve("PUT")  # noqa: E704
    def do_PATCH(self): self._serve("PATCH")  # noqa: E704
    def do_DELETE(self): self._serve("DELETE")  # noqa: E704

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        route = _route(self.fake, url.path)
        logged = route or _route(self.fake, url.path, served=False)  # RBAC names what is asked for, served or not
        verb, res_name = _verb(method, logged), _resource_name(logged)
        status, body, headers = self._answer(method, url.path, query, raw, route, verb, res_name)
        data = json.dumps(body).encode()
        self.fake.requests.append(Request(method, url.path, query, status, len(data), verb, res_name))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _answer(self, method, path, query, raw, route, verb, res_name):
        fake = self.fake
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _status(401, "Unauthorized", "no or wrong bearer token")
        for fault in fake.faults:
            if _matches(fault, method, path, query):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        fake.faults.remove(fault)
                extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                return (*_status(fault.status, _REASONS.get(fault.status, "Error"), fault.message)[:2], extra)
        if route is None:
            return _status(404, "NotFound", f"the server could not find the requested resource ({path})")
        if (verb, res_name) in fake.forbidden:
            res, ns = route[0], route[1]
            scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
            return _status(403, "Forbidden", f'{res.plural} is forbidden: User "system:serviceaccount:gpu-policy:gpu-policy" '
                                              f'cannot {verb} resource "{res.plural}" in API group "{res.group}" {scope}')
        body = json.loads(raw) if raw else None
        with fake._lock:
            answer = _handle(fake, method, query, body, route, self.headers.get("Content-Type", ""))
            controller = fake.after_read.get((route[0].group, route[0].plural))
            if method == "GET" and controller is not None:
                controller()  # it replaces stored objects, never changes them: the answer stays as it was
            return answer


_REASONS = {404: "NotFound", 409: "Conflict", 410: "Expired", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 403: "Forbidden"}


def _status(code: int, reason: str, message: str, details: dict | None = None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure" if code >= 400 else "Success",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return code, body, {}


def _matches(fault: Fault, method: str, path: str, query: dict) -> bool:
    if fault.method and fault.method != method:
        return False
    if fault.path and not re.fullmatch(fault.path, path):
        return False
    if fault.with_continue is not None and fault.with_continue != bool(query.get("continue")):
        return False
    return True


def _route(fake: FakeKubernetes, path: str, served: bool = True):
    """(resource, namespace, name, subresource) of a path, or None; `served=False`: also for
    a resource this server does not serve (so the request log names it)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    res = fake.resources.get((group, rest[0]))
    if res is None and not served:
        res = Resource(group, "", rest[0], "", bool(namespace))
    if res is None or (namespace and not res.namespaced):
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return res, namespace, name, sub


def _verb(method: str, route) -> str:
    if route is None:
        return method.lower()
    name = route[2]
    return {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}[method]


def _resource_name(route) -> str:
    if route is None:
        return "?/?"
    res, _, _, sub = route
    return f"{res.group}/{res.plural}" + (f"/{sub}" if sub else "")


def _handle(fake: FakeKubernetes, method: str, query: dict, body, route, content_type: str):
    res, namespace, name, sub = route
    key = (res.group, res.plural, namespace, name)
    if sub:
        if res.plural == "pods" and sub == "eviction" and method == "POST":
            return _evict(fake, namespace, name)
        return _status(404, "NotFound", f"no subresource {sub}")
    if not name:
        if method == "GET":
            return _list(fake, res, namespace, query)
        if method == "POST":
            return _create(fake, res, namespace, body)
        return _status(405, "MethodNotAllowed", f"{method} on a collection")
    current = fake._store.get(key)
    if current is None:
        return _status(404, "NotFound", f'{res.plural} "{name}" not found')
    if method == "GET":
        return 200, current, {}
    if method == "DELETE":
        if current["metadata"].get("finalizers"):  # gone once its controllers have removed them
            if not current["metadata"].get("deletionTimestamp"):
                marked = copy.deepcopy(current)
                marked["metadata"]["deletionTimestamp"] = now_rfc3339()
                fake._store[key] = fake._stamp(marked, res, current)
            return 200, fake._store[key], {}
        del fake._store[key]
        fake._version = next(fake._rv)
        return _status(200, "", "deleted")
    sent_rv = ((body or {}).get("metadata") or {}).get("resourceVersion")
    if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
        return _status(409, "Conflict", f'Operation cannot be fulfilled on {res.plural} "{name}": the object has been '
                                         "modified; please apply your changes to the latest version and try again")
    if method == "PUT":
        new = copy.deepcopy(body)
        new["metadata"] = {**new.get("metadata", {}), "uid": current["metadata"]["uid"],
                           "creationTimestamp": current["metadata"]["creationTimestamp"]}
    elif method == "PATCH":
        if "json-patch" in content_type:
            return _status(415, "UnsupportedMediaType", "the fake serves merge patches only")
        new = _merge(copy.deepcopy(current), body or {})
        if res.plural == "pods":
            fake.patches.append((namespace, name, body))
    else:
        return _status(405, "MethodNotAllowed", method)
    new.setdefault("metadata", {}).update(name=name, **({"namespace": namespace} if namespace else {}))
    refused = _admit(fake, res, method, new)
    if refused:
        return refused
    fake._store[key] = fake._stamp(new, res, current)
    return 200, fake._store[key], {}


def _admit(fake: FakeKubernetes, res: Resource, method: str, obj: dict):
    """A validating webhook's verdict on an object about to be stored: None, or the refusal."""
    webhook = fake.admission.get((res.group, res.plural))
    verdict = webhook(method, obj) if webhook is not None else None
    return _status(verdict[0], _REASONS.get(verdict[0], "Error"), verdict[1]) if verdict else None


def _create(fake: FakeKubernetes, res: Resource, namespace: str, body: dict):
    name = body.get("metadata", {}).get("name")
    if not name:
        return _status(422, "Invalid", "metadata.name: Required value")
    key = (res.group, res.plural, namespace, name)
    if key in fake._store:
        return _status(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
    obj = copy.deepcopy(body)
    obj["metadata"].pop("resourceVersion", None)
    if namespace:
        obj["metadata"]["namespace"] = namespace
    refused = _admit(fake, res, "POST", obj)
    if refused:
        return refused
    fake._store[key] = fake._stamp(obj, res, None)
    return 201, fake._store[key], {}


def _merge(target, patch):
    """JSON merge patch (RFC 7386): null deletes, mappings merge, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = _merge(target.get(k), v)
    return target


def _list(fake: FakeKubernetes, res: Resource, namespace: str, query: dict):
    token = query.get("continue")
    if token:
        try:
            snap_id, offset = json.loads(base64.urlsafe_b64decode(token.encode()))
        except ValueError:
            return _status(400, "BadRequest", "continue key is not valid")
        snap = fake._snapshots.get(snap_id)
        if snap is None or (fake.page_ttl_s is not None and time.monotonic() - snap[1] > fake.page_ttl_s):
            fake._snapshots.pop(snap_id, None)
            return _status(410, "Expired", "The provided continue parameter is too old to display a consistent list "
                                            "result. You can start a new list without the continue parameter.")
        items, version = snap[0], snap[2]
    else:
        items = [o for (g, p, ns, _), o in sorted(fake._store.items())
                 if g == res.group and p == res.plural and (not namespace or ns == namespace)
                 and _fields_match(o, query.get("fieldSelector", "")) and _labels_match(o, query.get("labelSelector", ""))]
        snap_id, offset, version = uuid.uuid4().hex, 0, fake._version
        fake._snapshots[snap_id] = (items, time.monotonic(), version)
    limit = int(query.get("limit") or 0)
    page = items[offset:offset + limit] if limit else items[offset:]
    meta = {"resourceVersion": str(version)}
    end = offset + len(page)
    if limit and end < len(items):
        meta["continue"] = base64.urlsafe_b64encode(json.dumps([snap_id, end]).encode()).decode()
        meta["remainingItemCount"] = len(items) - end
    else:
        fake._snapshots.pop(snap_id, None)
    return 200, {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": page}, {}


def _field(obj: dict, path: str):
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _fields_match(obj: dict, selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if _field(obj, k) == v:
                return False
        else:
            k, v = term.replace("==", "=").split("=", 1)
            if _field(obj, k) != v:
                return False
    return True


def _labels_match(obj: dict, selector: str) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _evict(fake: FakeKubernetes, namespace: str, name: str):
    key = ("", "pods", namespace, name)
    pod = fake._store.get(key)
    if pod is None:
        return _status(404, "NotFound", f'pods "{name}" not found')
    block = fake.blocks.get((namespace, name))
    if block is not None:
        if block.times is not None:
            block.times -= 1
            if block.times <= 0:
                del fake.blocks[(namespace, name)]
        code, body, _ = _status(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                                {"causes": [{"reason": "DisruptionBudget",
                                             "message": "The disruption budget gpu-pdb needs 1 healthy pods and has 1 "
                                                        "currently"}]})
        return code, body, ({"Retry-After": f"{block.retry_after:g}"} if block.retry_after is not None else {})
    if not pod["metadata"].get("deletionTimestamp"):
        pod = copy.deepcopy(pod)  # stored objects are replaced, never changed: list snapshots share them
        pod["metadata"]["deletionTimestamp"] = now_rfc3339()
        pod["metadata"]["deletionGracePeriodSeconds"] = pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"})
        fake._store[key] = fake._stamp(pod, fake.resources[("", "pods")], pod)
        fake.evictions.append((namespace, name))
        if fake.on_eviction is not None:
            fake.on_eviction(namespace, name)
    return _status(201, "", "evicted")
