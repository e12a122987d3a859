"""A simulated dcgm-exporter: a scenario's GPUs as dcgm-exporter's metric families, served by
prometheus_client's own HTTP server (one registry per exporter).

`gpu-policy dcgm-exporter-sim SCENARIO --port P` runs it so that demos and tests can point
a real Prometheus at a scenario. Names, types and labels follow dcgm-exporter: gauges
labelled gpu, UUID, device, modelName, pci_bus_id, Hostname (``hostname`` in newer exporters:
`hostname_label` picks), and namespace, pod, container for GPUs held by a job; the XID
series adds err_code and err_msg. Series a GPU does not support carry DCGM's blank values.
prometheus_client writes the text format (label values escaped, so that no node or pod name
can end a label or forge a series).
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.metrics_core import Metric

from gpu_policy.model import Scenario
from gpu_policy.model.telemetry import (
    DCGM_BLANK, ENGINE_ACTIVE, FB_FREE, FB_USED, GPU_UTIL, POWER, TEMPERATURE, XID_ERRORS)
from gpu_policy.telemetry.simulated import SimulatedGpu, simulated_gpus

_FP64_BLANK = 2.0 ** 47
#: the series dcgm-exporter exports by default that gpu-policy reads, all gauges, with their help
SERIES = {
    GPU_UTIL: "GPU utilization (in %).",
    FB_USED: "Framebuffer memory used (in MiB).",
    FB_FREE: "Framebuffer memory free (in MiB).",
    ENGINE_ACTIVE: "Ratio of time the graphics engine is active.",
    XID_ERRORS: "Value of the last XID error encountered.",
    POWER: "Power draw (in W).",
    TEMPERATURE: "GPU temperature (in C).",
}


class DcgmCollector:
    """A prometheus_client collector of the simulated GPUs of `scenario` (which may be
    replaced between scrapes), read afresh at each scrape."""

    def __init__(self, scenario: Scenario, hostname_label: str = "Hostname"):
        self.scenario, self.hostname_label = scenario, hostname_label

    def collect(self) -> Iterator[Metric]:
        gpus = sorted(simulated_gpus(self.scenario).items())
        for series, text in SERIES.items():
            family = Metric(series, text, "gauge")
            for key, g in gpus:
                labels = {"gpu": str(key.gpu), "UUID": g.uuid, "device": f"nvidia{key.gpu}", "modelName": g.model,
                          "pci_bus_id": f"00000000:{0x10 + key.gpu:02X}:00.0", self.hostname_label: key.node}
                if g.pod:
                    labels.update(namespace=g.namespace, pod=g.pod, container="main")
                if series == XID_ERRORS:
                    labels.update(err_code=str(g.xid or 0), err_msg="simulated" if g.xid else "")
                family.add_sample(series, labels, _value(series, g))
            yield family


def _value(series: str, g: SimulatedGpu) -> float:
    """The GPU's reading of `series`; DCGM's blank value where the GPU does not support it."""
    if series in g.unsupported:
        return _FP64_BLANK if series in (ENGINE_ACTIVE, POWER) else float(DCGM_BLANK)
    return float({
        GPU_UTIL: g.utilization, FB_USED: g.memory_used_mib, FB_FREE: g.memory_total_mib - g.memory_used_mib,
        ENGINE_ACTIVE: g.utilization / 100, XID_ERRORS: g.xid or 0,
        POWER: 60 + 3 * g.utilization, TEMPERATURE: 35 + g.utilization / 3,
    }[series])


def registry_of(collector: DcgmCollector) -> CollectorRegistry:
    """One exporter's registry: the collector alone."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def render_metrics(s: Scenario, hostname_label: str = "Hostname") -> str:
    """What the exporter of `s` answers a scrape with, in the Prometheus text format."""
    return generate_latest(registry_of(DcgmCollector(s, hostname_label))).decode()


def serve_collector(collector: DcgmCollector, host: str = "127.0.0.1", port: int = 0):
    """prometheus_client's HTTP server for the collector, serving in a daemon thread;
    `server.shutdown()` stops it. OSError when it cannot listen there."""
    server, _ = start_http_server(port, host, registry_of(collector))
    return server


def start_exporter(s: Scenario, host: str = "127.0.0.1", port: int = 0, hostname_label: str = "Hostname"):
    """The exporter of `s` on `host:port` (0: any free port), serving in a daemon thread."""
    return serve_collector(DcgmCollector(s, hostname_label), host, port)
