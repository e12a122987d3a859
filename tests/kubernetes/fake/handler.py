"""The HTTP side: authentication, injected faults, RBAC refusals, routing, latency, the request log."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from . import crud, watch
from .watch import at_version
from .selectors import flag
from .server import TOKEN, Fault, FakeKubernetes, Request, Resource
from .status import REASONS, status


class Handler(BaseHTTPRequestHandler):
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
        route = route_of(self.fake, url.path)
        logged = route or route_of(self.fake, url.path, served=False)  # RBAC names what is asked for, served or not
        verb, res_name = verb_of(method, logged, query), resource_name(logged)
        refusal = self._refusal(method, url.path, query, route, verb, res_name)
        if refusal is None and verb == "watch":
            request = Request(method, url.path, query, 200, 0, verb, res_name)
            self.fake.requests.append(request)
            watch.serve(self.fake, self, route[0], route[1], query, request)
            return
        with self.fake.answering():
            status_code, body, headers = refusal or self._answer(method, query, raw, route)
        data = json.dumps(at_version(body, route[0]) if refusal is None else body).encode()
        self.fake.requests.append(Request(method, url.path, query, status_code, len(data), verb, res_name))
        self.send_response(status_code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _refusal(self, method, path, query, route, verb, res_name):
        """The answer when the request is not served: no token, an injected fault, no such
        resource, RBAC; else None."""
        fake = self.fake
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return status(401, "Unauthorized", "no or wrong bearer token")
        for fault in fake.faults:
            if _matches(fault, method, path, query):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        fake.faults.remove(fault)
                extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                return (*status(fault.status, REASONS.get(fault.status, "Error"), fault.message)[:2], extra)
        if route is None:
            return status(404, "NotFound", f"the server could not find the requested resource ({path})")
        if (verb, res_name) in fake.forbidden:
            res, ns = route[0], route[1]
            scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
            user = "system:serviceaccount:gpu-policy:gpu-policy"
            return status(403, "Forbidden", f'{res.plural} is forbidden: User "{user}" cannot {verb} resource '
                                             f'"{res.plural}" in API group "{res.group}" {scope}')
        return None

    def _answer(self, method, query, raw, route):
        fake = self.fake
        try:
            body = json.loads(raw) if raw else None
        except ValueError as e:
            return status(400, "BadRequest", f"the request body is not JSON: {e}")
        with fake._lock:
            answer = crud.handle(fake, method, query, body, route, self.headers.get("Content-Type", ""))
            controller = fake.after_read.get((route[0].group, route[0].plural))
            if method == "GET" and controller is not None:
                controller()  # it replaces stored objects, never changes them: the answer stays as it was
            return answer


def _matches(fault: Fault, method: str, path: str, query: dict) -> bool:
    if fault.method and fault.method != method:
        return False
    if fault.path and not re.fullmatch(fault.path, path):
        return False
    if fault.with_continue is not None and fault.with_continue != bool(query.get("continue")):
        return False
    return True


def route_of(fake: FakeKubernetes, path: str, served: bool = True):
    """(resource, namespace, name, subresource) of a path, or None; `served=False`: also for
    a resource this server does not serve (so the request log names it)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
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
    if served and version != res.version:  # another version of the resource, if it is served at it
        if version not in res.served:
            return None
        res = dataclasses.replace(res, version=version)
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return res, namespace, name, sub


def verb_of(method: str, route, query: dict) -> str:
    if route is None:
        return method.lower()
    if method == "GET" and not route[2] and flag(query, "watch"):
        return "watch"
    name = route[2]
    return {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}[method]


def resource_name(route) -> str:
    if route is None:
        return "?/?"
    res, _, _, sub = route
    return f"{res.group}/{res.plural}" + (f"/{sub}" if sub else "")
