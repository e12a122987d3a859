"""The controller's /metrics: every name the contract lists, parsed by prometheus_client's own
parser and scraped by a real Prometheus (Debian's), with values that match the plan."""

import json
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from gpu_policy.controller.metrics import serve
from tests.kubernetes.controller_harness import cluster_of, gated_pod, new_controller, settle
from tests.telemetry.conftest import running_prometheus, wait_until

#: the metric families spec/kubernetes.md ("Health and metrics") names
CONTRACT = {"gpu_policy_queue_allocated_gpus", "gpu_policy_queue_deserved_gpus", "gpu_policy_queue_fair_share_gpus",
            "gpu_policy_queue_limit_gpus", "gpu_policy_pending_pods", "gpu_policy_admission_wait_seconds",
            "gpu_policy_preemptions", "gpu_policy_moves", "gpu_policy_plan_seconds", "gpu_policy_api_requests",
            "gpu_policy_watch_restarts", "gpu_policy_is_leader",
            "gpu_policy_queue_usage_gpu_hours"}  # counters' families drop `_total`


def _query(url: str, expr: str) -> dict[tuple, float]:
    with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.request.quote(expr)}", timeout=10) as answer:
        result = json.load(answer)["data"]["result"]
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("__name__", "instance", "job"))):
            float(r["value"][1]) for r in result}


def test_metrics_parse_are_scraped_and_match_the_plan(api, cluster, fake_time, tmp_path):
    cluster_of(api, queues=[{"name": "a", "deserved": 16, "limit": 20}, {"name": "b", "deserved": 16}])
    for i in range(24):
        api.put(gated_pod(f"a-{i}", "a"))
    for i in range(4):
        api.put(gated_pod(f"b-{i}", "b"))
    c = new_controller(cluster)
    server = serve(c.metrics, 0, c.ready, host="127.0.0.1")
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        plan = c.round()  # the plan the gauges now show
        families = {f.name: f for f in text_string_to_metric_families(c.metrics.text().decode())}
        assert CONTRACT <= set(families)
        queues = {q.name: q for q in plan.queues}
        waiting = sum(1 for d in plan.jobs if d.action == "wait")
        assert waiting == 4 and {d.code for d in plan.jobs if d.action == "wait"} == {"QueueAboveLimit"}

        port = server.server_address[1]
        scrape = f"  - job_name: controller\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
        with running_prometheus(tmp_path, scrape) as url:
            wait_until(lambda: _query(url, "gpu_policy_is_leader"), 30, "Prometheus to scrape the controller")
            assert _query(url, "gpu_policy_is_leader") == {(): 1.0}
            for name, field in (("allocated", "allocated_after"), ("deserved", "deserved"),
                                ("fair_share", "fair_share")):
                got = _query(url, f"gpu_policy_queue_{name}_gpus")
                assert got == {(("queue", q),): float(getattr(queues[q], field)) for q in ("a", "b")}, name
            assert _query(url, "gpu_policy_queue_limit_gpus") == {(("queue", "a"),): 20.0}  # b has no limit
            assert _query(url, "gpu_policy_pending_pods") == {(("queue", "a"), ("reason", "QueueAboveLimit")): 4.0}
            assert _query(url, "sum(gpu_policy_api_requests_total{verb='watch'})")[()] >= 4
    finally:
        server.shutdown()
        c.shut_down()
