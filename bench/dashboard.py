"""Render docs/img/dashboard.png: four panels of deploy/grafana/gpu-policy.json, their PromQL
answered by a real Prometheus (Debian's package) over a short run.

Prometheus scrapes, every second, the simulated dcgm-exporter of the scenario as it is now and
a stand-in for the controller's /metrics (prometheus_client, the contract's names): each round
plans the scenario, applies the plan and publishes the plan's numbers, as the controller does.
The run starts from seed problem 1 (the greedy team: team-b reclaims its share), then team-b
submits more work, which waits, until team-a's jobs finish and team-b borrows their GPUs. Not a benchmark: the picture shows what the dashboard shows.

    python bench/dashboard.py [--rounds 8] [--every 3] [--out docs/img/dashboard.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpu_policy import load_scenario, plan  # noqa: E402
from gpu_policy.model.apply import apply_plan  # noqa: E402
from gpu_policy.model import Job  # noqa: E402
from gpu_policy.telemetry.exporter import DcgmCollector, serve_collector  # noqa: E402

PANELS = ("GPUs per queue: allocated, fair share, deserved", "Pending pods by reason", "Preemptions and moves",
          "GPU utilisation of allocated GPUs per queue (DCGM)")


class Served:
    """What the two HTTP servers answer: the scenario's DCGM series and the controller's metrics."""

    def __init__(self, scenario):
        from prometheus_client import CollectorRegistry, Counter as PCounter, Gauge, Histogram

        self.dcgm = DcgmCollector(scenario)  # the simulated exporter's GPUs: the scenario as it is now
        r = self.registry = CollectorRegistry()
        self.gauges = {name: Gauge(f"gpu_policy_queue_{name}_gpus", name, ["queue"], registry=r)
                       for name in ("allocated", "deserved", "fair_share")}
        self.pending = Gauge("gpu_policy_pending_pods", "pending", ["queue", "reason"], registry=r)
        self.preemptions = PCounter("gpu_policy_preemptions", "preempted", ["queue", "reason"], registry=r)
        self.moves = PCounter("gpu_policy_moves", "moved", ["queue"], registry=r)
        self.plan_seconds = Histogram("gpu_policy_plan_seconds", "plan", registry=r)

    @property
    def scenario(self):
        return self.dcgm.scenario

    @scenario.setter
    def scenario(self, scenario) -> None:
        self.dcgm.scenario = scenario

    def publish(self, result, jobs: dict[str, Job], before: bool = False) -> None:
        """The plan's numbers; `before`: the cluster as it was before the plan (its
        counters' series created at 0, so that Prometheus sees them rise)."""
        for q in result.queues:
            self.gauges["allocated"].labels(q.name).set(q.allocated_before if before else q.allocated_after)
            self.gauges["deserved"].labels(q.name).set(q.deserved)
            self.gauges["fair_share"].labels(q.name).set(q.fair_share)
        self.pending.clear()
        if before:
            for d in result.jobs:
                if d.action == "preempt":
                    self.preemptions.labels(d.queue, d.code)
            return
        pods: Counter = Counter()
        for d in result.jobs:
            if d.action == "wait":
                pods[d.queue, d.code] += jobs[d.name].replicas
        for (queue, code), n in pods.items():
            self.pending.labels(queue, code).set(n)
        for d in result.jobs:
            if d.action == "preempt":
                self.preemptions.labels(d.queue, d.code).inc()
            elif d.action == "move":
                self.moves.labels(d.queue).inc()
        self.plan_seconds.observe(result.solver.seconds)


def events(s, round_: int):
    """The run's story: team-b submits 4 jobs of 5 GPUs in round 3; all of team-a's jobs finish in round 5."""
    jobs = list(s.jobs)
    if round_ == 3:
        jobs += [Job(f"b-new-{i}", "team-b", 5, submitted_at=100 + i) for i in range(4)]
    if round_ == 5:
        jobs = [j for j in jobs if j.queue != "team-a"]
    return dataclasses.replace(s, jobs=jobs, expect=None)


def main() -> int:
    from prometheus_client import start_http_server

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--every", type=float, default=3.0, help="seconds between plans")
    p.add_argument("--out", default=str(ROOT / "docs" / "img" / "dashboard.png"))
    args = p.parse_args()
    binary = shutil.which("prometheus")
    if binary is None:
        sys.exit("needs Debian's prometheus package (apt-get install prometheus)")
    seed = load_scenario(ROOT / "tests" / "scenarios" / "seed1-greedy-team.yaml")
    busy = {j.name: {"utilization": 35 if j.queue == "team-a" else 85} for j in seed.jobs}
    busy.update({f"b-new-{i}": {"utilization": 90} for i in range(4)})
    served = Served(dataclasses.replace(seed, telemetry={"jobs": busy}))
    dcgm = serve_collector(served.dcgm)
    controller, _ = start_http_server(0, "127.0.0.1", served.registry)
    with tempfile.TemporaryDirectory() as folder, socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        config = Path(folder) / "prometheus.yml"
        config.write_text(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: dcgm
    honor_labels: true
    static_configs: [{{targets: ['127.0.0.1:{dcgm.server_address[1]}']}}]
  - job_name: gpu-policy
    static_configs: [{{targets: ['127.0.0.1:{controller.server_address[1]}']}}]
""")
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={folder}/data",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"])
        try:
            for _ in range(60):
                try:
                    if requests.get(f"{url}/-/ready", timeout=1).ok:
                        break
                except requests.RequestException:
                    pass
                time.sleep(0.5)
            began = time.time()
            for round_ in range(args.rounds):
                served.scenario = events(served.scenario, round_)
                result = plan(served.scenario)
                if round_ == 0:  # the greedy team's cluster, until Prometheus has scraped it twice
                    served.publish(result, {}, before=True)
                    while len(query(url, "count_over_time(gpu_policy_queue_allocated_gpus[1m])")) < 2 or float(
                            query(url, "min(count_over_time(gpu_policy_queue_allocated_gpus[1m]))")[0]["value"][1]) < 2:
                        time.sleep(0.5)
                    began = time.time() - args.every
                    time.sleep(args.every)
                served.publish(result, {j.name: j for j in served.scenario.jobs})
                served.scenario = apply_plan(served.scenario, result)
                print(f"round {round_ + 1}: {result.summary['starts']} starts, "
                      f"{result.summary['preemptions']} preemptions, {result.summary['waiting']} waiting", flush=True)
                time.sleep(args.every)
            draw(url, began, time.time(), args.out)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            dcgm.shutdown()
            controller.shutdown()
    return 0


def query(url: str, expr: str) -> list:
    return requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5).json()["data"]["result"]


def draw(url: str, start: float, end: float, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = json.loads((ROOT / "deploy" / "grafana" / "gpu-policy.json").read_text())
    panels = [next(p for p in dashboard["panels"] if p["title"] == title) for title in PANELS]
    fig, axes = plt.subplots(2, 2, figsize=(15, 7.5))
    for ax, panel in zip(axes.flat, panels):
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "4s").replace("$queue", ".*")
            answer = requests.get(f"{url}/api/v1/query_range", timeout=10,
                                  params={"query": expr, "start": start, "end": end, "step": 1}).json()
            for series in answer["data"]["result"]:
                legend = target["legendFormat"]
                for key, value in series["metric"].items():
                    legend = legend.replace("{{" + key + "}}", value)
                xs = [float(t) - start for t, _ in series["values"]]
                ax.plot(xs, [float(v) for _, v in series["values"]], label=legend, drawstyle="steps-post")
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel("seconds")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("gpu-policy dashboard: its PromQL over a real Prometheus (simulated dcgm-exporter, "
                 "controller metrics from the plans)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
