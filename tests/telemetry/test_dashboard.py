"""deploy/grafana/gpu-policy.json and deploy/prometheus/gpu-policy-alerts.yaml: every PromQL
expression parses (promtool, and a real Prometheus that answers it), names only series the
controller or dcgm-exporter serves, and the DCGM-per-queue join gives the right numbers."""

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

from gpu_policy import parse_scenario
from gpu_policy.telemetry.exporter import SERIES as DCGM_SERIES, start_exporter
from gpu_policy.telemetry.simulated import simulated_gpus
from tests.telemetry.conftest import prometheus_binary, running_prometheus, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "gpu-policy.json"
ALERTS = ROOT / "deploy" / "prometheus" / "gpu-policy-alerts.yaml"
#: Grafana's variables, as a query sent to Prometheus would carry them.
VARIABLES = {"$__rate_interval": "1m", "$queue": ".*"}


def _served_by_the_controller() -> set[str]:
    """The series names the controller's registry exposes (gpu_policy.controller.metrics):
    each family's samples, as Prometheus stores them (`_total`, `_bucket`, `_sum`, `_count`)."""
    from gpu_policy.controller.metrics import Metrics

    kinds = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    return {family.name + suffix for family in Metrics().registry.collect() for suffix in kinds[family.type]}


#: what the controller serves (the contract's names, spec/kubernetes.md "Health and metrics",
#: and two counters beyond it: bind timeouts, failed Event writes), read from its registry
CONTROLLER = _served_by_the_controller()
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
SCENARIO = {  # namespaces named after their queues (the join's assumption), one GPU free
    "nodes": [{"name": "node-a", "gpus": 4}, {"name": "node-b", "gpus": 2}],
    "queues": [{"name": "team-a", "deserved": 2}, {"name": "team-b", "deserved": 2}],
    "jobs": [{"name": "a-1", "queue": "team-a", "gpus": 2, "running": ["node-a"]},
             {"name": "a-2", "queue": "team-a", "gpus": 1, "running": ["node-a"]},
             {"name": "b-1", "queue": "team-b", "gpus": 2, "running": ["node-b"]}],
    "telemetry": {"jobs": {"a-1": {"utilization": 80}, "a-2": {"utilization": 20}, "b-1": {"utilization": 50}}},
}


def dashboard_exprs() -> list[str]:
    data = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in data["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"].removeprefix("label_values(").split(",")[0]
              for v in data["templating"]["list"] if v["type"] == "query"]
    return exprs


def alert_exprs() -> list[str]:
    return [r["expr"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def substituted(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def series_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside strings, label
    matchers, ranges and grouping clauses that are neither functions nor keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', " ", substituted(expr))
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\b", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", text):
        if not m.group(2) and m.group(1) not in KEYWORDS:
            names.add(m.group(1))
    return names


def test_every_expression_names_only_served_series():
    exprs = dashboard_exprs() + alert_exprs()
    assert len(exprs) >= 20
    used = set().union(*map(series_names, exprs))
    assert used <= CONTROLLER | set(DCGM_SERIES), used - CONTROLLER - set(DCGM_SERIES)
    # the dashboard shows what the issue asks: shares, pending by reason, latencies, stops, DCGM per queue
    joined = " ".join(dashboard_exprs())
    for name in ("gpu_policy_queue_allocated_gpus", "gpu_policy_queue_fair_share_gpus", "gpu_policy_queue_deserved_gpus",
                 "gpu_policy_pending_pods", "gpu_policy_admission_wait_seconds_bucket", "gpu_policy_plan_seconds_bucket",
                 "gpu_policy_preemptions_total", "gpu_policy_moves_total", "DCGM_FI_DEV_GPU_UTIL"):
        assert name in joined


def test_the_name_finder_is_not_fooled():
    assert series_names('sum by (queue) (rate(a_total{x="b c"}[5m])) and on (queue) b > bool 0') == {"a_total", "b"}
    assert series_names('label_replace(m{n!=""}, "queue", "$1", "namespace", "(.+)")') == {"m"}


def test_promtool_parses_every_expression(tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("Debian's prometheus package (promtool) is not installed")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": substituted(e)} for i, e in enumerate(dashboard_exprs())]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    for rules_file in (path, ALERTS):
        done = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def _controller_metrics(held: dict[str, float]):
    """A stand-in for the controller's registry, with the series the dashboard reads."""
    client = pytest.importorskip("prometheus_client")
    r = client.CollectorRegistry()
    for name in ("gpu_policy_queue_allocated_gpus", "gpu_policy_queue_deserved_gpus", "gpu_policy_queue_fair_share_gpus"):
        gauge = client.Gauge(name, name, ["queue"], registry=r)
        for queue, gpus in held.items():
            gauge.labels(queue).set(gpus)
    client.Gauge("gpu_policy_pending_pods", "pending", ["queue", "reason"], registry=r).labels("team-b", "NotEnoughFreeGpus").set(1)
    for name in ("gpu_policy_admission_wait_seconds", "gpu_policy_plan_seconds"):
        client.Histogram(name, name, registry=r).observe(0.3)
    return r


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    prometheus_binary()
    s = parse_scenario(SCENARIO, "dashboard")
    exporter = start_exporter(s, hostname_label="Hostname")
    from prometheus_client import start_http_server

    controller, _ = start_http_server(0, "127.0.0.1", _controller_metrics({"team-a": 3, "team-b": 2}))
    try:
        with running_prometheus(tmp_path_factory.mktemp("prometheus-dashboard"), f"""  - job_name: dcgm
    honor_labels: true
    static_configs: [{{targets: ['127.0.0.1:{exporter.server_address[1]}']}}]
  - job_name: gpu-policy
    static_configs: [{{targets: ['127.0.0.1:{controller.server_address[1]}']}}]
""") as url:
            wait_until(lambda: len(query(url, "up == 1")) == 2, 30, "both targets scraped")
            wait_until(lambda: query(url, "gpu_policy_queue_allocated_gpus") and query(url, "DCGM_FI_DEV_GPU_UTIL"),
                       30, "the series in Prometheus")
            yield url, s
    finally:
        exporter.shutdown()
        controller.shutdown()


def query(url: str, expr: str):
    answer = requests.get(f"{url}/api/v1/query", params={"query": expr, "time": time.time()}, timeout=5).json()
    assert answer["status"] == "success", f"{expr}: {answer.get('error')}"
    return answer["data"]["result"]


def test_a_real_prometheus_answers_every_expression(prometheus):
    url, _ = prometheus
    for expr in dashboard_exprs() + alert_exprs():
        query(url, substituted(expr))


def test_dcgm_utilisation_per_queue_joins_by_namespace(prometheus):
    url, s = prometheus
    panel = next(p for p in json.loads(DASHBOARD.read_text())["panels"] if "DCGM" in p["title"])
    got = {r["metric"]["queue"]: float(r["value"][1]) for r in query(url, substituted(panel["targets"][0]["expr"]))}
    by_queue: dict[str, list[float]] = {}
    for g in simulated_gpus(s).values():
        if g.pod:
            by_queue.setdefault(g.namespace, []).append(g.utilization)
    assert got == pytest.approx({q: sum(u) / len(u) for q, u in by_queue.items()})
    assert set(got) == {"team-a", "team-b"}
