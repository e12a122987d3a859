"""Admission at scale: `gpu-policy controller` against the fake API server, in steady state or
in a burst, against an API server that answers at once or late.

The fake API server, the arrivals, the stand-in scheduler (it binds each released pod onto its
hostname selector, as soon as the release is stored) and the latency clock run in a child
process, as an API server and kubelets would; the controller runs in this process, so its peak
memory is this process's. Each pod is timed from its creation to its release, both as the API
server stored them.

Steady state (the default): gated pods arrive at --rate per second (and as many running pods
end); after --warmup, --duration seconds are measured. Prints, per size: creation -> release
p50/p99, plans per second, LISTs, the controller's API requests per minute by verb (its own
counters), the bytes the API server answered (watch streams excluded) and peak memory.

A burst (--burst N): N gated pods created evenly over --burst-s seconds on a cluster with room
for all, measured until the last is released (or --timeout). Prints, per size: the seconds from
the last creation to the last release, the end-to-end admission rate (pods released per second,
first creation to last release), creation -> release p50/p99, the API requests per admitted pod
(all the controller sent from the first creation until it is quiet after the last release, its
last round's Events included, by verb), the rounds and the failed ones, whether the leader
stopped acting, whether the standby (--standby: a second replica) ever led, and peak memory.

--api-latency S: the API server answers every request (watches aside) S seconds late.
Figures and the exact commands: docs/benchmarks.md, "Admission".

    .venv/bin/python bench/admission.py [--sizes 1000x4200,5000x21000] [--rate 10] [--warmup 30]
                                        [--duration 300] [--burst N [--burst-s 10]] [--api-latency S]
                                        [--standby] [--plot PNG]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import queue
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_policy.controller import Controller, ControllerSettings  # noqa: E402
from gpu_policy.controller.metrics import Metrics  # noqa: E402
from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings, names  # noqa: E402

GPUS, TEAMS = 8, 4


@dataclass
class Run:
    """What one run is: its cluster, its arrivals and its API server."""

    nodes: int
    pods: int
    rate: float = 10.0
    burst: int = 0  # 0: steady arrivals at `rate`
    burst_s: float = 10.0
    latency_s: float = 0.0
    standby: bool = False
    warmup: float = 30.0
    duration: float = 300.0
    timeout: float = 300.0


#: when the running pods started (status.startTime: each running job's running_for_s, which the look
#: sets anew every round)
STARTED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))


def _pod(name: str, team: str, node: str | None = None) -> dict:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": names.ADMISSION_GATE}]
    status = {"phase": "Running", "startTime": STARTED} if node else {"phase": "Pending"}
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "jobs", "labels": {names.QUEUE_LABEL: team}},
            "spec": spec, "status": status}


def _load(api, nodes: int, pods: int) -> list[str]:
    import yaml

    for n in range(nodes):
        api.put({"kind": "Node", "metadata": {"name": f"node-{n}", "labels": {names.HOSTNAME_LABEL: f"node-{n}"}},
                 "status": {"allocatable": {"nvidia.com/gpu": str(GPUS), "cpu": "96", "memory": "1024Gi"},
                            "conditions": [{"type": "Ready", "status": "True"}]}})
    api.put({"kind": "Namespace", "metadata": {"name": "jobs", "labels": {"gpu-policy.io/managed": "true"}}})
    queues = [{"name": f"team-{t}", "deserved": nodes * GPUS // TEAMS} for t in range(TEAMS)]
    api.put({"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": names.DEFAULT_NAMESPACE},
             "data": {names.QUEUES_KEY: yaml.safe_dump(queues)}})
    running = []
    for i in range(pods):
        name = f"run-{i}"
        api.put(_pod(name, f"team-{i % TEAMS}", f"node-{i % nodes}"))
        running.append(name)
    return running


class Scheduler:
    """The stand-in kube-scheduler: told of every change the API server stores, it notes when each
    arriving pod is released and binds it onto its hostname selector from a thread of its own."""

    def __init__(self, api):
        self.api = api
        self.created: dict[str, float] = {}  # arriving pod -> when it was stored
        self.released: dict[str, float] = {}  # arriving pod -> when its release was stored
        self.bound: list[str] = []  # arriving pods, in the order they were bound
        self._to_bind: queue.Queue = queue.Queue()
        api.on_change = self._seen
        threading.Thread(target=self._bind, daemon=True).start()

    def _seen(self, change: str, obj: dict) -> None:  # under the API server's lock: note it, never block
        if obj.get("kind") != "Pod" or change != "MODIFIED":
            return
        name, spec = obj["metadata"]["name"], obj.get("spec") or {}
        host = (spec.get("nodeSelector") or {}).get(names.HOSTNAME_LABEL)
        if name in self.created and name not in self.released and host and not spec.get("schedulingGates") \
                and not spec.get("nodeName"):
            self.released[name] = time.monotonic()
            self._to_bind.put((name, host))

    def _bind(self) -> None:
        while True:
            name, host = self._to_bind.get()
            self.api.bind("jobs", name, host)
            self.bound.append(name)

    def latencies(self, lo: float = float("-inf"), hi: float = float("inf")) -> list[float]:
        """Creation -> release of the pods released between `lo` and `hi` (monotonic)."""
        return sorted(t - self.created[n] for n, t in list(self.released.items()) if lo <= t <= hi)


def serve(run: Run, conn) -> None:
    """The child: the cluster, its arrivals (and departures), the scheduler and the latency clock."""
    from tests.kubernetes.fake_api import FakeKubernetes

    rng = random.Random(0)
    with FakeKubernetes() as api:
        running = _load(api, run.nodes, run.pods)
        api.latency_s = run.latency_s
        conn.send(api.kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig"))
        conn.recv()  # the controller is synced: start arriving
        first = len(api.requests)
        scheduler = Scheduler(api)
        report = _burst(api, run, scheduler, rng) if run.burst else _steady(api, run, scheduler, running, rng, conn)
        served = [r for r in api.requests[first:] if r.query.get("watch") not in ("true", "1")]
        conn.send({**report, "bytes": sum(r.bytes for r in served)})
        conn.recv()  # the controller has stopped: the API server may go now (not before: its last round)
        sys.stderr = open(os.devnull, "w")  # a watch's last flush may meet the socket its reader closed: no trace


def _arrive(api, scheduler: Scheduler, i: int, team: str) -> None:
    name = f"new-{i}"
    scheduler.created[name] = time.monotonic()
    api.put(_pod(name, team))


def _steady(api, run: Run, scheduler: Scheduler, running: list[str], rng: random.Random, conn) -> dict:
    began, i, bound = time.monotonic(), 0, 0
    while not conn.poll():
        time.sleep(max(0.0, began + i / run.rate - time.monotonic()))
        _arrive(api, scheduler, i, f"team-{rng.randrange(TEAMS)}")
        new = scheduler.bound[bound:]  # what runs now may end too
        bound += len(new)
        running.extend(new)
        api.delete("pods", running.pop(rng.randrange(len(running))), "jobs")
        i += 1
    conn.recv()  # stop
    lo, hi = conn.recv()  # the window measured, seconds after the first arrival
    return {"latencies": scheduler.latencies(began + lo, began + hi),
            "waiting": len(scheduler.created) - len(scheduler.released)}


def _burst(api, run: Run, scheduler: Scheduler, rng: random.Random) -> dict:
    began = time.monotonic()
    for i in range(run.burst):
        time.sleep(max(0.0, began + i * run.burst_s / run.burst - time.monotonic()))
        _arrive(api, scheduler, i, f"team-{rng.randrange(TEAMS)}")
    last = time.monotonic()
    while len(scheduler.released) < run.burst and time.monotonic() < last + run.timeout:
        time.sleep(0.05)
    done = max(scheduler.released.values(), default=last)
    return {"latencies": scheduler.latencies(), "waiting": run.burst - len(scheduler.released),
            "after_last_s": done - last, "seconds": done - began}


class Said(logging.Handler):
    """Counts what the replicas log that a run is judged by."""

    WORDS = ("round failed", "stopped acting", "took over", "leading as")

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if any(w in text for w in self.WORDS):
            self.lines.append(text)

    def count(self, words: str) -> int:
        return sum(1 for line in self.lines if words in line)


@dataclass
class Replica:
    controller: Controller
    thread: threading.Thread = field(init=False)

    def __post_init__(self):
        self.controller.start()
        self.thread = threading.Thread(target=self.controller.run, daemon=True)
        self.thread.start()


def controller(kubeconfig: str) -> Controller:
    """A controller as `gpu-policy controller` makes one with its defaults (a 15 s lease)."""
    metrics = Metrics()  # every request counted, as `gpu-policy controller` counts them
    plain = KubernetesCluster("k8s://", kubeconfig=kubeconfig)
    cluster = KubernetesCluster("k8s://", api_client=metrics.counted_client(plain.api_client.configuration),
                                settings=KubernetesSettings(lease_duration_s=15.0))
    return Controller(cluster, ControllerSettings(), metrics=metrics)


def replica(kubeconfig: str) -> Replica:
    """A replica as `gpu-policy controller` runs one, started."""
    return Replica(controller(kubeconfig))


def requests_by_verb(controller: Controller) -> dict[str, float]:
    out: dict[str, float] = {}
    for metric in controller.metrics.api_requests.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                out[sample.labels["verb"]] = out.get(sample.labels["verb"], 0) + sample.value
    return out


def _settled(controller: Controller, quiet_s: float = 1.0) -> dict[str, float]:
    """The controller's request counts once they have not changed for `quiet_s`."""
    time.sleep(quiet_s)
    return requests_by_verb(controller)


def measure(run: Run) -> dict:
    said = Said()
    for name, level in (("gpu_policy", logging.INFO), ("gpu_policy.kubernetes.write.admit", logging.WARNING)):
        logging.getLogger(name).setLevel(level)
    logging.getLogger("gpu_policy").addHandler(said)
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(run, child), daemon=True)
    server.start()
    kubeconfig = parent.recv()
    leader = replica(kubeconfig)
    c = leader.controller
    while not c.cache.synced or not c.plans:
        time.sleep(0.1)
    standby = replica(kubeconfig) if run.standby else None
    while standby is not None and not standby.controller.cache.synced:
        time.sleep(0.1)
    said.lines.clear()
    before, plans = requests_by_verb(c), c.plans
    parent.send("arrive")
    if not run.burst:
        time.sleep(run.warmup)
        before, plans = requests_by_verb(c), c.plans
        time.sleep(run.duration)
        parent.send("stop")
        parent.send((run.warmup, run.warmup + run.duration))
    report = parent.recv()
    after = requests_by_verb(c)
    while run.burst and after != (settled := _settled(c)):  # the last round's Events are sent too
        after = settled
    after, plans = requests_by_verb(c), c.plans - plans
    for r in (leader, standby):  # the replicas first (each finishes its round, releases the Lease), then the server
        if r is not None:
            r.controller.stop.set()
            r.thread.join(timeout=120)
    logging.getLogger("gpu_policy.controller.informer").setLevel(logging.ERROR)  # the watches end with the server
    parent.send("stopped")
    server.join(timeout=60)
    logging.getLogger("gpu_policy").removeHandler(said)
    lat = report["latencies"]
    sent = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in after}
    return {"p50": statistics.median(lat) if lat else None,
            "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None, "released": len(lat),
            "plans": plans, "sent": sent, "answered_mib": report["bytes"] / 2 ** 20,
            "waiting_at_end": report["waiting"], "after_last_s": report.get("after_last_s"),
            "seconds": report.get("seconds"), "failed_rounds": said.count("round failed"),
            "stopped_acting": said.count("stopped acting"),
            "standby_led": standby is not None and any(standby.controller.lease.identity in line
                                                       for line in said.lines if "leading as" in line),
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def steady_line(run: Run, m: dict) -> str:
    per_minute = {verb: n * 60 / run.duration for verb, n in m["sent"].items()}
    verbs = ", ".join(f"{v} {n:.1f}" for v, n in sorted(per_minute.items()) if n)
    return (f"{run.nodes} nodes / {run.pods} pods: release p50 {_seconds(m['p50'])} s, p99 {_seconds(m['p99'])} s "
            f"({m['released']} released, {m['waiting_at_end']} gated at the end); {m['plans'] / run.duration:.2f} "
            f"plans/s; LISTs in steady state {m['sent'].get('list', 0):.0f}; requests per minute: {verbs or 'none'}; "
            f"API server answered {m['answered_mib']:.1f} MiB during the arrivals (watch streams excluded); "
            f"{m['failed_rounds']} rounds failed; controller peak memory {m['peak_mib']:.0f} MiB")


def burst_line(run: Run, m: dict) -> str:
    admitted = max(m["released"], 1)
    verbs = ", ".join(f"{v} {n / admitted:.2f}" for v, n in sorted(m["sent"].items()) if n)
    standby = "" if not run.standby else \
        f"; the standby {'led at some point' if m['standby_led'] else 'never led'}"
    return (f"{run.nodes} nodes / {run.pods} pods, {run.burst} arriving in {run.burst_s:g} s, API latency "
            f"{run.latency_s:g} s: {m['released']} released ({m['waiting_at_end']} still gated), the last "
            f"{_seconds(m['after_last_s'])} s after the last creation; {m['released'] / m['seconds']:.0f} pods/s "
            f"end to end; creation -> release p50 {_seconds(m['p50'])} s, p99 {_seconds(m['p99'])} s; "
            f"{sum(m['sent'].values()) / admitted:.2f} API requests per admitted pod ({verbs}); {m['plans']} rounds, "
            f"{m['failed_rounds']} failed; the leader stopped acting {m['stopped_acting']} times{standby}; "
            f"controller peak memory {m['peak_mib']:.0f} MiB")


def plot(rows: list[tuple[int, dict]], title: str, path: str) -> None:
    """Release latency (p50, p99) against cluster size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    nodes = [n for n, _ in rows]
    for key, style in (("p50", "o-"), ("p99", "s--")):
        ax.plot(nodes, [m[key] for _, m in rows], style, label=f"creation -> release, {key}")
    ax.set_xlabel("nodes (8 GPUs each; 4.2 running pods per node)")
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.set_xticks(nodes)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def sizes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split("x")) for part in text.split(",") if part]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=sizes, default=sizes("1000x4200,5000x21000"), help="NODESxPODS,...")
    parser.add_argument("--rate", type=float, default=10.0, help="gated pods arriving per second (default 10)")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of arrivals before measuring")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of steady state measured")
    parser.add_argument("--burst", type=int, default=0, help="N gated pods at once, instead of steady arrivals")
    parser.add_argument("--burst-s", type=float, default=10.0, help="seconds over which the burst is created")
    parser.add_argument("--api-latency", type=float, default=0.0, help="seconds the API server takes to answer")
    parser.add_argument("--standby", action="store_true", help="a second replica, on standby")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a burst may take after its last pod")
    parser.add_argument("--plot", metavar="PNG", help="write release latency against cluster size to this file")
    args = parser.parse_args()
    base = dict(rate=args.rate, burst=args.burst, burst_s=args.burst_s, latency_s=args.api_latency,
                standby=args.standby, warmup=args.warmup, duration=args.duration, timeout=args.timeout)
    if not args.burst:
        print(f"arrivals {args.rate:g}/s (and as many pods ending); {args.warmup:g} s warm-up, "
              f"{args.duration:g} s measured; API latency {args.api_latency:g} s")
    rows = []
    for nodes, pods in args.sizes:
        run = Run(nodes, pods, **base)
        m = measure(run)
        rows.append((nodes, m))
        print(burst_line(run, m) if run.burst else steady_line(run, m), flush=True)
    if args.plot:
        what = f"a burst of {args.burst}" if args.burst else f"{args.rate:g} arrivals/s"
        plot(rows, f"gpu-policy controller: {what}, API latency {args.api_latency:g} s", args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
