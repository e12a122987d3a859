"""The controller's metrics (prometheus_client, one registry per controller) and its one
HTTP port: /metrics, /healthz (alive), /readyz (cache synced; leader or standby).

Cardinality is bounded: labels are queues (from the queues ConfigMap), reason codes (a
fixed set, gpu_policy.planner.codes), API verbs and resources, and HTTP codes.
API requests are counted where the official client sends them (`counted_client`: an
ApiClient whose REST client reports each request), so every request counts once, a watch
connection as one `verb="watch"`.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gpu_policy.kubernetes.transport.reporting import Report, ReportingApiClient

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class Metrics:
    def __init__(self):
        r = self.registry = CollectorRegistry()
        q = ["queue"]
        self.allocated = Gauge("gpu_policy_queue_allocated_gpus", "GPUs the queue holds after the last plan", q,
                               registry=r)
        self.deserved = Gauge("gpu_policy_queue_deserved_gpus", "The queue's deserved quota", q, registry=r)
        self.fair_share = Gauge("gpu_policy_queue_fair_share_gpus", "The queue's fair share in the last plan", q,
                                registry=r)
        self.limit = Gauge("gpu_policy_queue_limit_gpus", "The queue's limit (no sample: none)", q, registry=r)
        self.usage = Gauge("gpu_policy_queue_usage_gpu_hours",
                           "The queue's decayed past usage in the last plan, GPU-hours (no sample: not counted)", q,
                           registry=r)
        self.pending = Gauge("gpu_policy_pending_pods", "Gated pods waiting, by why", ["queue", "reason"], registry=r)
        self.admission_wait = Histogram("gpu_policy_admission_wait_seconds", "Pod creation to release", registry=r,
                                        buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 300, 900, 3600))
        self.preemptions = Counter("gpu_policy_preemptions", "Jobs preempted", ["queue", "reason"], registry=r)
        self.moves = Counter("gpu_policy_moves", "Jobs moved", q, registry=r)
        self.plan_seconds = Histogram("gpu_policy_plan_seconds", "Look and plan, seconds", registry=r,
                                      buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))
        self.api_requests = Counter("gpu_policy_api_requests", "API requests sent", ["verb", "resource", "code"],
                                    registry=r)
        self.watch_restarts = Counter("gpu_policy_watch_restarts", "Watches resumed after a break or a 410",
                                      ["resource"], registry=r)
        self.is_leader = Gauge("gpu_policy_is_leader", "1 while this replica holds the Lease", registry=r)
        self.bind_timeouts = Counter("gpu_policy_bind_timeouts", "Released pods not bound within bind_timeout_s",
                                     registry=r)
        self.event_failures = Counter("gpu_policy_event_failures", "Event writes that failed", registry=r)
        self.composition_requests = Gauge("gpu_policy_composition_requests",
                                          "gpu-policy's ComposabilityRequests by the operator's status.state",
                                          ["state"], registry=r)
        self.compositions = Counter("gpu_policy_compositions", "Attaches and detaches written, by result",
                                    ["action", "result"], registry=r)
        # preemption that loses no work (gpu_policy.kubernetes.write.checkpoint_first)
        self.checkpoint_requests = Counter("gpu_policy_checkpoint_requests",
                                           "Victims asked to checkpoint, by how it ended: saved, deadline, withdrawn",
                                           ["result"], registry=r)
        self.lost_work = Histogram("gpu_policy_preemption_lost_gpu_seconds",
                                   "GPU-seconds of work the plan counted lost, per victim evicted", registry=r,
                                   buckets=(0, 60, 300, 900, 3600, 4 * 3600, 16 * 3600, 64 * 3600, 256 * 3600))
        self.reclaim_wait = Histogram("gpu_policy_reclaim_wait_seconds",
                                      "From the plan that preempted for a job to its release", registry=r,
                                      buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 3600))

    def show_queues(self, queues) -> None:
        """The queue gauges from a plan's QueueReports (gauges of vanished queues go). The fair
        share is the one past usage gave, where it counts."""
        for gauge in (self.allocated, self.deserved, self.fair_share, self.limit, self.usage):
            gauge.clear()
        for q in queues:
            if q.name.startswith("gpu-policy.io/"):
                continue  # the snapshot-only queues (unmanaged, terminating)
            self.allocated.labels(q.name).set(q.allocated_after)
            self.deserved.labels(q.name).set(q.deserved)
            self.fair_share.labels(q.name).set(q.fair_share)
            if q.limit is not None:
                self.limit.labels(q.name).set(q.limit)
            if q.usage_gpu_h is not None:
                self.usage.labels(q.name).set(q.usage_gpu_h)

    def counted_client(self, configuration, and_then: Report | None = None) -> ReportingApiClient:
        """An ApiClient for `configuration` whose every request is counted, by verb, resource
        and status code (a watch once, as verb="watch"); `and_then` hears of each request too,
        once counted (a benchmark's or a test's view of the answers)."""
        if and_then is None:
            return ReportingApiClient(configuration, self._count)
        return ReportingApiClient(configuration, lambda *request: (self._count(*request), and_then(*request)))

    def _count(self, method: str, url: str, query_params, code: str) -> None:
        verb, resource = _verb_and_resource(method, url, query_params)
        self.api_requests.labels(verb, resource, code).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)


def _verb_and_resource(method: str, url: str, query_params) -> tuple[str, str]:
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    query.update({k: str(v) for k, v in (query_params or [])} if isinstance(query_params, list) else
                 {k: str(v) for k, v in (query_params or {}).items()})
    path = [p for p in parts.path.split("/") if p]
    rest = path[2:] if path[:1] == ["api"] else path[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource = "/".join(rest[:1] + rest[2:3]) or "?"
    if method == "GET":
        verb = "get" if len(rest) > 1 else ("watch" if query.get("watch") in ("true", "True", "1") else "list")
    else:
        verb = _VERBS.get(method, method.lower())
    return verb, resource


def serve(metrics: Metrics, port: int, ready: Callable[[], bool], host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """Start the HTTP port in a thread; `.shutdown()` stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            path = urlsplit(self.path).path
            if path == "/metrics":
                self._send(200, metrics.text(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._send(200, b"ok\n")
            elif path == "/readyz":
                ok = ready()
                self._send(200 if ok else 503, b"ok\n" if ok else b"cache not synced\n")
            else:
                self._send(404, b"not found\n")

        def _send(self, code: int, body: bytes, kind: str = "text/plain; charset=utf-8"):
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # quiet: probes come every few seconds
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="gpu-policy-metrics", daemon=True).start()
    return server
