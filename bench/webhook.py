"""The admission webhook under load: AdmissionReviews of GPU pods sent at --rate per second for
--duration seconds, each over a new TLS connection to 127.0.0.1, as the API server's calls would
arrive, and timed from when it was due to be sent (so a webhook that falls behind shows in the
latency, not in a lower rate) to its answer read.

The webhook runs in a child process (its own interpreter, as a controller replica would be),
with a certificate issued at start; the namespaces it knows stand in for the controller's cache.
Every answer is checked: allowed, with the patch that adds the gate. Prints the reviews sent,
answered and failed, the rate achieved, and latency p50/p90/p99/max. Loopback only; it stops by
itself (each request has a 10 s timeout, the run --duration plus that). Figures and the
command: docs/benchmarks.md, "Admission webhook".

    .venv/bin/python bench/webhook.py [--rate 100] [--duration 30] [--senders 32]
"""

from __future__ import annotations

import argparse
import base64
import datetime
import http.client
import json
import multiprocessing
import queue
import socket
import ssl
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_policy.controller import certificates  # noqa: E402
from gpu_policy.controller.webhook import Webhook  # noqa: E402
from gpu_policy.controller.webhook_tls import Pair, WebhookSettings  # noqa: E402

HOST = "gpu-policy-webhook.gpu-policy.svc"
TIMEOUT_S = 10.0


class _Issued:
    """The keeper's part: a pair issued once (the bench measures reviews, not the Secret)."""

    def __init__(self, now: datetime.datetime):
        issued = certificates.issue(certificates.service_names("gpu-policy-webhook", "gpu-policy"), now,
                                    datetime.timedelta(days=1))
        self.ca = issued.ca_pem
        self.pair = Pair(issued.cert_pem, issued.key_pem, now + datetime.timedelta(days=1))

    def refresh(self) -> Pair:
        return self.pair


def _serve(pipe, stop) -> None:
    """The child: a webhook on an ephemeral loopback port until `stop` is set."""
    issued = _Issued(datetime.datetime.now(datetime.timezone.utc))
    managed = {("", "ml"): {"metadata": {"name": "ml", "labels": {"gpu-policy.io/managed": "true"}}}}
    hook = Webhook(issued, WebhookSettings(port=0, check_every_s=3600), lambda: managed, host="127.0.0.1")
    port = hook.start()
    pipe.send((port, issued.ca))
    stop.wait()
    hook.shutdown()


def pod(i: int) -> dict:
    """A GPU pod as the API server sends it after defaulting (about 3 kB of JSON)."""
    container = {
        "name": "trainer", "image": "registry.example.com/ml/trainer:2026.11", "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "train"], "args": ["--epochs", "10", "--checkpoint-every", "600"],
        "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(8)],
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
                      "limits": {"memory": "64Gi", "nvidia.com/gpu": "8"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "kube-api-access-x", "readOnly": True,
                                                                 "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"train-{i}", "namespace": "ml", "labels": {"gpu-policy.io/queue": "team-a",
                                                                              "gpu-policy.io/job": "bert"},
                         "annotations": {"gpu-policy.io/replicas": "4"}},
            "spec": {"containers": [container, {**container, "name": "sidecar", "resources": {}}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                     "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                     "serviceAccountName": "default", "schedulerName": "default-scheduler",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"}}


def review(i: int) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": f"uid-{i}", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kubeflow:pipeline-runner"}, "object": pod(i),
        "oldObject": None, "dryRun": False}}).encode()


def send(port: int, context: ssl.SSLContext, i: int) -> str | None:
    """One review over a new TLS connection; None when answered as expected, else what was wrong."""
    body = review(i)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as raw:
        with context.wrap_socket(raw, server_hostname=HOST) as tls:
            tls.sendall(b"POST /mutate-pods?timeout=5s HTTP/1.1\r\nHost: " + HOST.encode() +
                        b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
                        b"\r\n\r\n" + body)
            answer = http.client.HTTPResponse(tls)
            answer.begin()
            text = answer.read()
    if answer.status != 200:
        return f"HTTP {answer.status}"
    response = json.loads(text)["response"]
    patch = json.loads(base64.b64decode(response.get("patch", "")) or b"[]")
    if response.get("uid") != f"uid-{i}" or not response.get("allowed") or not patch:
        return f"unexpected answer {str(response)[:80]}"
    return None


def load(port: int, ca: bytes, rate: float, duration_s: float, senders: int) -> tuple[list[float], list[str], float]:
    """Send at `rate` for `duration_s`; (latencies from due time to answer, failures, seconds taken)."""
    context = ssl.create_default_context(cadata=ca.decode())
    due: queue.Queue = queue.Queue()
    latencies, failures, lock = [], [], threading.Lock()

    def sender():
        while (item := due.get()) is not None:
            i, at = item
            try:
                problem = send(port, context, i)
            except OSError as e:
                problem = f"{type(e).__name__}: {e}"
            with lock:
                (failures.append(problem) if problem else latencies.append(time.perf_counter() - at))

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    for t in threads:
        t.start()
    began = time.perf_counter()
    total = int(rate * duration_s)
    for i in range(total):
        at = began + i / rate
        time.sleep(max(0.0, at - time.perf_counter()))
        due.put((i, at))
    for _ in threads:
        due.put(None)
    for t in threads:
        t.join(TIMEOUT_S + duration_s)
    return latencies, failures, time.perf_counter() - began


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=100.0, help="reviews per second (default 100)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load (default 30)")
    ap.add_argument("--senders", type=int, default=32, help="client threads, as the API server's connections")
    args = ap.parse_args()
    parent, child = multiprocessing.Pipe()
    stop = multiprocessing.Event()
    server = multiprocessing.Process(target=_serve, args=(child, stop), daemon=True)
    server.start()
    try:
        if not parent.poll(60):
            print("the webhook did not start within 60 s", file=sys.stderr)
            return 1
        port, ca = parent.recv()
        send(port, ssl.create_default_context(cadata=ca.decode()), -1)  # one warm-up review
        latencies, failures, took = load(port, ca, args.rate, args.duration, args.senders)
    finally:
        stop.set()
        server.join(10)
    n = len(latencies)
    ms = sorted(x * 1000 for x in latencies)
    print(f"reviews sent {int(args.rate * args.duration)}, answered {n}, failed {len(failures)} "
          f"in {took:.1f} s ({n / took:.1f}/s)")
    if failures:
        print("failures:", sorted(set(failures))[:5])
    if n:
        q = statistics.quantiles(ms, n=100)
        print(f"latency ms: p50 {q[49]:.1f}  p90 {q[89]:.1f}  p99 {q[98]:.1f}  max {ms[-1]:.1f}")
    return 0 if not failures and n and q[98] < 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
