"""The admission webhook: `POST /mutate-pods` over TLS on `--webhook-port`, served by every
controller replica (no Lease: it reads the cache and writes nothing per review), for clusters
where MutatingAdmissionPolicy is not served (spec "Admission"; docs/kubernetes.md, "The
admission webhook").

Bounded: a body is read only up to 3 MiB (a larger one is refused unread), and each
connection, its TLS handshake included, has `request_timeout_s` from being accepted to its
last byte: one thread shuts down every connection that outlives its deadline, however slowly
its peer sends. One review per connection (HTTP/1.0), each answered in its own thread. The
certificate comes from `TlsKeeper` (the Secret), is loaded into a new TLS context when it
changes, and new connections take the new context; until there is one, nothing is served
and /readyz says not ready.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import os
import socket
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

from gpu_policy.controller.admission_review import MAX_REVIEW_BYTES, Unreadable, decide
from gpu_policy.controller.webhook_tls import Pair, TlsKeeper, WebhookSettings
from gpu_policy.errors import GpuPolicyError
from gpu_policy.kubernetes.names import WEBHOOK_PATH
from gpu_policy.kubernetes.write.gate import managed_namespace

log = logging.getLogger(__name__)


class _Deadlines:
    """Shuts down each registered connection at its deadline (its blocking reads and writes
    then end at once); one thread for all of them."""

    def __init__(self, stop: threading.Event):
        self._heap: list[tuple[float, int, list]] = []
        self._count = itertools.count()
        self._wake = threading.Condition()
        self._stop = stop
        threading.Thread(target=self._run, name="gpu-policy-webhook-deadlines", daemon=True).start()

    def add(self, sock: socket.socket, deadline: float) -> list:
        """Watch `sock` until `deadline` (time.monotonic); the entry's [0] may be replaced by the
        socket that wraps it, and is set to None once the connection is done."""
        entry = [sock]
        with self._wake:
            heapq.heappush(self._heap, (deadline, next(self._count), entry))
            self._wake.notify()
        return entry

    def _run(self) -> None:
        with self._wake:
            while not self._stop.is_set():
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, _, entry = heapq.heappop(self._heap)
                    if entry[0] is not None:
                        _shut(entry[0])
                self._wake.wait(min(1.0, self._heap[0][0] - now) if self._heap else 1.0)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed meanwhile
        pass


class _Server(ThreadingHTTPServer):
    """Plain TCP accepts; TLS and the request happen in the connection's own thread, so a slow
    handshake holds only its thread, until its deadline."""

    daemon_threads = True
    context: ssl.SSLContext | None = None

    def __init__(self, address, handler, timeout_s: float, deadlines: _Deadlines):
        super().__init__(address, handler)
        self.timeout_s, self.deadlines = timeout_s, deadlines

    def finish_request(self, request, client_address) -> None:
        context = self.context
        if context is None:  # no certificate yet: not ready, nothing to serve with
            return
        watched = self.deadlines.add(request, time.monotonic() + self.timeout_s)
        try:
            request.settimeout(self.timeout_s)
            tls = context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
            watched[0] = tls
            tls.do_handshake()
            self.RequestHandlerClass(tls, client_address, self)
        except (ssl.SSLError, OSError):  # a peer that is not a TLS client, hung up or ran out of time
            pass
        finally:
            sock, watched[0] = watched[0], None
            sock.close()


class Webhook:
    """Serves reviews with the pair `keeper` keeps. `namespaces()`: the controller cache's
    namespaces by (namespace, name) key, None until they are listed."""

    def __init__(self, keeper: TlsKeeper, settings: WebhookSettings, namespaces: Callable[[], dict | None],
                 gpu_resource: str = "nvidia.com/gpu", registry: CollectorRegistry | None = None,
                 host: str = "0.0.0.0"):
        self.keeper, self.settings, self.namespaces, self.gpu_resource = keeper, settings, namespaces, gpu_resource
        self.host = host
        self.stop = threading.Event()
        self.pair: Pair | None = None
        self.server: _Server | None = None
        registry = registry or CollectorRegistry()
        self.reviews = Counter("gpu_policy_webhook_reviews", "AdmissionReviews answered, by result "
                               "(gated, allowed, refused)", ["result"], registry=registry)
        self.seconds = Histogram("gpu_policy_webhook_review_seconds", "From a review's first byte read to its "
                                 "answer sent", registry=registry, buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5))

    def managed(self, namespace: str) -> bool | None:
        known = self.namespaces()
        return None if known is None else managed_namespace(known.get(("", namespace)))

    def ready(self) -> bool:
        """Serving with a certificate the caBundle trusts, and the namespaces known."""
        return self.server is not None and self.server.context is not None and self.namespaces() is not None

    def start(self) -> int:
        """Listen on the port (OSError when it cannot), check the certificates once, then keep
        them in a thread; the port listened on."""
        deadlines = _Deadlines(self.stop)
        self.server = _Server((self.host, self.settings.port), self._handler(), self.settings.request_timeout_s,
                              deadlines)
        threading.Thread(target=self.server.serve_forever, name="gpu-policy-webhook", daemon=True).start()
        served = self.refresh()
        threading.Thread(target=self._keep, args=(served,), name="gpu-policy-webhook-tls", daemon=True).start()
        return self.server.server_address[1]

    def shutdown(self) -> None:
        self.stop.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def refresh(self) -> bool:
        """Check the certificates now (the keeper renews when due); True when serving after it."""
        try:
            pair = self.keeper.refresh()
        except GpuPolicyError as e:
            log.warning("webhook: %s", e)
            pair = None
        if pair is not None and pair != self.pair:
            self.server.context = _context(pair)
            self.pair = pair
            log.info("webhook: serving a certificate valid until %s", pair.not_after.isoformat(timespec="seconds"))
        return self.server.context is not None

    def _keep(self, served: bool) -> None:
        s = self.settings
        while not self.stop.wait(s.check_every_s if served else s.retry_s):
            served = self.refresh()

    def _handler(self):
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                began = time.perf_counter()
                if self.path.split("?")[0] != WEBHOOK_PATH:
                    return self._send(404, f"no such path: only POST {WEBHOOK_PATH}\n")
                length = self.headers.get("Content-Length", "")
                if not length.isdigit():
                    return self._send(411, "an AdmissionReview needs a Content-Length\n")
                if int(length) > MAX_REVIEW_BYTES:
                    webhook.reviews.labels("refused").inc()
                    return self._send(413, f"an AdmissionReview of {int(length):,} bytes is above the "
                                           f"{MAX_REVIEW_BYTES:,}-byte limit; refused unread\n")
                body = self.rfile.read(int(length))
                try:
                    decision = decide(body, webhook.managed, webhook.gpu_resource)
                except Unreadable as e:
                    webhook.reviews.labels("refused").inc()
                    return self._send(400, f"{e}\n")
                webhook.reviews.labels(decision.result).inc()
                self._send(200, json.dumps(decision.answer), "application/json")
                webhook.seconds.observe(time.perf_counter() - began)

            def do_GET(self):  # noqa: N802
                self._send(405, f"only POST {WEBHOOK_PATH}\n")

            def _send(self, code: int, text: str, kind: str = "text/plain; charset=utf-8") -> None:
                body = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet: the API server calls for every pod created
                pass

        return Handler


def _context(pair: Pair) -> ssl.SSLContext:
    """A server TLS context with the pair (ssl reads keys from files only: a private folder,
    removed at once)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="gpu-policy-webhook-") as folder:
        cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        for path, data in ((cert, pair.cert_pem), (key, pair.key_pem)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(data)
        context.load_cert_chain(cert, key)
    return context
