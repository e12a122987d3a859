"""A simulated dcgm-exporter: serves /metrics in the exporter's text format.

`gpu-policy dcgm-exporter-sim SCENARIO --port P` runs it so that demos and
tests can point a real Prometheus at a scenario. Labels follow dcgm-exporter:
gpu, UUID, device, modelName, pci_bus_id, Hostname (``hostname`` in newer
exporters: `hostname_label` picks), and namespace, pod, container for GPUs held
by a job. Series a GPU does not support carry DCGM's blank values.
"""

from __future__ import annotations

import threading
from typing import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpu_policy.model import Scenario
from gpu_policy.model.telemetry import (
    DCGM_BLANK, ENGINE_ACTIVE, FB_FREE, FB_USED, GPU_UTIL, POWER, TEMPERATURE, XID_ERRORS)
from gpu_policy.telemetry.simulated import simulated_gpus

_FP64_BLANK = 2.0 ** 47
_HELP = {
    GPU_UTIL: ("gauge", "GPU utilization (in %)."),
    FB_USED: ("gauge", "Framebuffer memory used (in MiB)."),
    FB_FREE: ("gauge", "Framebuffer memory free (in MiB)."),
    ENGINE_ACTIVE: ("gauge", "Ratio of time the graphics engine is active."),
    XID_ERRORS: ("gauge", "Value of the last XID error encountered."),
    POWER: ("gauge", "Power draw (in W)."),
    TEMPERATURE: ("gauge", "GPU temperature (in C)."),
}


def escape_label_value(value: str) -> str:
    """A label value as the Prometheus text format requires: backslash, double quote and
    line feed escaped, so that no node or pod name can end the label or forge a series."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(s: Scenario, hostname_label: str = "Hostname") -> str:
    lines = []
    gpus = simulated_gpus(s)
    for series, (kind, text) in _HELP.items():
        lines += [f"# HELP {series} {text}", f"# TYPE {series} {kind}"]
        for key, g in sorted(gpus.items()):
            labels = {"gpu": str(key.gpu), "UUID": g.uuid, "device": f"nvidia{key.gpu}", "modelName": g.model,
                      "pci_bus_id": f"00000000:{0x10 + key.gpu:02X}:00.0", hostname_label: key.node}
            if g.pod:
                labels.update(namespace=g.namespace, pod=g.pod, container="main")
            value = {
                GPU_UTIL: g.utilization, FB_USED: g.memory_used_mib, FB_FREE: g.memory_total_mib - g.memory_used_mib,
                ENGINE_ACTIVE: g.utilization / 100, XID_ERRORS: float(g.xid or 0),
                POWER: 60 + 3 * g.utilization, TEMPERATURE: 35 + g.utilization / 3,
            }[series]
            if series == XID_ERRORS:
                labels.update(err_code=str(g.xid or 0), err_msg="simulated" if g.xid else "")
            if series in g.unsupported:
                value = _FP64_BLANK if series in (ENGINE_ACTIVE, POWER) else float(DCGM_BLANK)
            text_labels = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
            lines.append(f"{series}{{{text_labels}}} {float(value)!r}")  # repr: exact, blanks included
    return "\n".join(lines) + "\n"


def metrics_server(body: Callable[[], bytes], host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server answering GET /metrics with `body()` (not started: call serve_forever)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            data = body()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # quiet: Prometheus scrapes every second
            pass

    return ThreadingHTTPServer((host, port), Handler)


def start_metrics_server(body: Callable[[], bytes], host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """`metrics_server`, serving in a daemon thread; `server.shutdown()` stops it."""
    server = metrics_server(body, host, port)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics-server").start()
    return server


def make_exporter(s: Scenario, host: str = "127.0.0.1", port: int = 0,
                  hostname_label: str = "Hostname") -> ThreadingHTTPServer:
    """An HTTP server for the scenario's /metrics (not started: call serve_forever, or use start_exporter)."""
    return metrics_server(lambda: render_metrics(s, hostname_label).encode(), host, port)


def start_exporter(s: Scenario, host: str = "127.0.0.1", port: int = 0,
                   hostname_label: str = "Hostname") -> ThreadingHTTPServer:
    """Serve in a daemon thread; `server.shutdown()` stops it."""
    return start_metrics_server(lambda: render_metrics(s, hostname_label).encode(), host, port)
