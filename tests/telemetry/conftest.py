"""A real Prometheus (Debian's package) scraping two simulated dcgm-exporters on 127.0.0.1."""

import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from gpu_policy import parse_scenario
from gpu_policy.telemetry.exporter import start_exporter

#: node-a: the older exporter's `Hostname` label; an idle job, a busy one, XID 79 on GPU 3,
#: and GPU 0 without profiling or power readings (DCGM's blank values).
NODE_A = {
    "nodes": [{"name": "node-a", "gpus": 4}],
    "queues": [{"name": "team-a", "deserved": 0}, {"name": "team-b", "deserved": 2}],
    "jobs": [
        {"name": "idle-job", "queue": "team-a", "gpus": 2, "running": ["node-a"], "gpu_indices": [[0, 1]],
         "submitted_at": 0},
        {"name": "busy-job", "queue": "team-a", "gpus": 2, "running": ["node-a"], "gpu_indices": [[2, 3]],
         "submitted_at": 1},
        {"name": "b-waits", "queue": "team-b", "gpus": 2, "submitted_at": 2},
    ],
    "telemetry": {
        "jobs": {"idle-job": {"utilization": 1}, "busy-job": {"utilization": 85}},
        "gpus": [{"node": "node-a", "gpu": 3, "xid": 79},
                 {"node": "node-a", "gpu": 0, "unsupported": ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_POWER_USAGE"]}],
    },
}
#: node-b: the newer exporter's `hostname` label.
NODE_B = {
    "nodes": [{"name": "node-b", "gpus": 2}],
    "queues": [{"name": "team-c"}],
    "jobs": [{"name": "c-job", "queue": "team-c", "gpus": 2, "running": ["node-b"]}],
    "telemetry": {"jobs": {"c-job": {"utilization": 50}}},
}
WINDOW_S = 4.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if check():
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def prometheus_binary() -> str:
    """Debian's prometheus; the test skips without it (fails on CI, which installs it)."""
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's prometheus package is missing: .ci/run installs it")
        pytest.skip("Debian's prometheus package is not installed (apt-get install prometheus; .ci/run does it)")
    return binary


@contextmanager
def running_prometheus(folder: Path, scrape_configs: str):
    """A real Prometheus on 127.0.0.1 scraping every second with `scrape_configs` (YAML
    under `scrape_configs:`); yields its URL once ready, stops it on exit."""
    binary = prometheus_binary()
    config = folder / "prometheus.yml"
    config.write_text(f"global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n{scrape_configs}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(folder / "prometheus.log", "w")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: requests.get(f"{url}/-/ready", timeout=1).ok, 30, "Prometheus to be ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def prometheus_url(tmp_path_factory):
    prometheus_binary()
    exporters = [start_exporter(parse_scenario(NODE_A, "node-a"), hostname_label="Hostname"),
                 start_exporter(parse_scenario(NODE_B, "node-b"), hostname_label="hostname")]
    targets = ", ".join(f"'127.0.0.1:{e.server_address[1]}'" for e in exporters)
    try:
        with running_prometheus(tmp_path_factory.mktemp("prometheus"), f"""  - job_name: dcgm
    honor_labels: true
    static_configs: [{{targets: [{targets}]}}]
""") as url:
            series = lambda: requests.get(f"{url}/api/v1/query", params={"query": "DCGM_FI_DEV_GPU_UTIL"},  # noqa: E731
                                          timeout=1).json()["data"]["result"]
            wait_until(lambda: len(series()) == 6, 30, "both exporters' GPUs in Prometheus")
            time.sleep(WINDOW_S + 2)  # a whole window of 1 s scrapes
            yield url
    finally:
        for e in exporters:
            e.shutdown()
