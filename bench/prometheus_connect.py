"""Could prometheus-api-client's PrometheusConnect be the default way gpu-policy reads
Prometheus? Each hostile Prometheus of docs/hostile.md and tests/telemetry/test_hostile.py,
on 127.0.0.1, read by a whole collection through gpu-policy's bounded client (a URL) and
through a PrometheusConnect (its defaults, its own retries off so that only ours count),
with the same settings: a 0.5 s request timeout, a 5 s collection deadline, no retry, the
default 64 MiB answer limit.

Prints per case and transport the one-line answer, the seconds the collection took, and how
much the reading process's peak memory grew. Each reading runs in a child process, killed
after --limit seconds (its row then says so). Figures and command: docs/telemetry.md, "Your
own PrometheusConnect".

    .venv/bin/python bench/prometheus_connect.py [--huge-mb 256] [--drip-bytes 100] [--limit 120]
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import resource
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_policy.telemetry import PrometheusDcgmSource, TelemetrySettings, TelemetryUnavailable  # noqa: E402

SETTINGS = TelemetrySettings(timeout_s=0.5, total_timeout_s=5.0, retries=0)


def serve(mode: str, args) -> ThreadingHTTPServer:
    """A Prometheus that answers every query in one hostile way."""
    huge = b'{"status": "success", "data": {"resultType": "vector", "result": []}, "pad": "' + \
        b"x" * (args.huge_mb << 20) + b'"}' if mode == "huge" else b""
    bomb = gzip.compress(b'{"status": "success", "data": {"resultType": "vector", "result": []}, "pad": "' +
                         b" " * (args.huge_mb << 20) + b'"}', compresslevel=9) if mode == "gzip-bomb" else b""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            try:
                self.answer()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def answer(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if mode == "drip":  # one byte every 0.2 s: each read is quick, the whole is not
                self.send_header("Content-Length", str(args.drip_bytes))
                self.end_headers()
                for _ in range(args.drip_bytes):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
                return
            body = {"huge": huge, "gzip-bomb": bomb}.get(mode) or (
                b'{"status": "success", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
            if mode == "gzip-bomb":
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    Thread(target=server.serve_forever, daemon=True).start()
    return server


def read(url: str, transport: str, pipe) -> None:
    """The child: one collection; sends (answer, seconds, peak memory growth in MiB)."""
    if transport == "PrometheusConnect":
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        prometheus = PrometheusConnect(url=url, retry=Retry(total=0))
    else:
        prometheus = url
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    began = time.monotonic()
    try:
        PrometheusDcgmSource(prometheus, SETTINGS, sleep=lambda s: None).collect()
        answer = "collected"
    except TelemetryUnavailable as e:
        answer = str(e).replace(url, "URL")
    took = time.monotonic() - began
    pipe.send((answer, took, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--huge-mb", type=int, default=256, help="size of the huge answer and of the bomb's inflated body")
    ap.add_argument("--drip-bytes", type=int, default=100, help="bytes of the drip's answer, one every 0.2 s")
    ap.add_argument("--limit", type=float, default=120.0, help="seconds a reading may take before it is killed")
    args = ap.parse_args()
    rows = []
    for mode in ("drip", "huge", "gzip-bomb", "nested"):
        server = serve(mode, args)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        for transport in ("bounded (URL)", "PrometheusConnect"):
            parent, child = multiprocessing.Pipe()
            reader = multiprocessing.Process(target=read, args=(url, transport, child))
            reader.start()
            if parent.poll(args.limit):
                answer, took, grew = parent.recv()
            else:
                answer, took, grew = f"killed after {args.limit:g} s", args.limit, float("nan")
            reader.kill()
            reader.join()
            rows.append((mode, transport, f"{took:.1f}", f"{grew:.0f}", answer[:150]))
            print(" | ".join(rows[-1]), flush=True)
        server.shutdown()
        server.server_close()
    print(json.dumps({"settings": {"timeout_s": SETTINGS.timeout_s, "total_timeout_s": SETTINGS.total_timeout_s,
                                   "retries": SETTINGS.retries, "max_answer_bytes": SETTINGS.max_answer_bytes},
                      "huge_mb": args.huge_mb, "drip_bytes": args.drip_bytes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
