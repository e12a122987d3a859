"""Admission at scale: `gpu-policy controller` against the fake API server with gated pods
arriving at --rate per second (and as many running pods ending), measured in steady state.

The fake API server, the arrivals, the stand-in scheduler (it binds each released pod onto
its hostname selector) and the latency clock run in a child process, as an API server and
kubelets would; the controller runs in this process, so its peak memory is this process's.
Prints, per size: creation-to-release latency p50/p99 (each arrival timed from its create to
the first look that finds it released, looks every 50 ms), plans per second, the controller's
API requests per minute by verb (its own counters), the bytes the API server answered
during the arrivals (watch streams excluded), and peak memory. Figures and the exact command:
docs/benchmarks.md.

    .venv/bin/python bench/admission.py [--sizes 1000x4200,5000x21000] [--rate 10] [--warmup 30]
                                        [--duration 300]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_policy.controller import Controller, ControllerSettings  # noqa: E402
from gpu_policy.controller.metrics import Metrics  # noqa: E402
from gpu_policy.kubernetes import KubernetesCluster, names  # noqa: E402

GPUS, TEAMS = 8, 4


def _pod(name: str, team: str, node: str | None = None) -> dict:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": names.ADMISSION_GATE}]
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "jobs", "labels": {names.QUEUE_LABEL: team}},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def _load(api, nodes: int, pods: int, rng: random.Random) -> list[str]:
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


def serve(nodes: int, pods: int, rate: float, conn) -> None:
    """The child: the cluster, its arrivals and departures, the scheduler and the latency clock."""
    from tests.kubernetes.fake_api import FakeKubernetes

    rng = random.Random(0)
    with FakeKubernetes() as api:
        running = _load(api, nodes, pods, rng)
        conn.send(api.kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig"))
        conn.recv()  # the controller is synced: start arriving
        first = len(api.requests)
        created: dict[str, float] = {}
        latencies: list[tuple[float, float]] = []  # (released at, seconds)
        stop = threading.Event()

        def scheduler():
            while not stop.wait(0.05):
                now = time.monotonic()
                for name in list(created):
                    pod = api.get("pods", name, "jobs")
                    if pod is None or pod["spec"].get("schedulingGates"):
                        continue
                    latencies.append((now, now - created.pop(name)))
                    api.bind("jobs", name, pod["spec"]["nodeSelector"][names.HOSTNAME_LABEL])
                    running.append(name)

        threading.Thread(target=scheduler, daemon=True).start()
        began, i = time.monotonic(), 0
        while not conn.poll():
            due = began + i / rate
            time.sleep(max(0.0, due - time.monotonic()))
            name = f"new-{i}"
            created[name] = time.monotonic()
            api.put(_pod(name, f"team-{rng.randrange(TEAMS)}"))
            gone = running.pop(rng.randrange(len(running)))
            api.delete("pods", gone, "jobs")
            i += 1
        conn.recv()  # stop
        window = conn.recv()  # (from, to), seconds after the first arrival
        stop.set()
        lo, hi = began + window[0], began + window[1]
        served = [r for r in api.requests[first:] if r.query.get("watch") not in ("true", "1")]
        conn.send({"latencies": [s for t, s in latencies if lo <= t <= hi], "bytes": sum(r.bytes for r in served),
                   "waiting": len(created)})
        conn.recv()  # the controller has stopped: the API server may go now (not before: its last round)
        sys.stderr = open(os.devnull, "w")  # a watch's last flush may meet the socket its reader closed: no trace


def requests_by_verb(controller: Controller) -> dict[str, float]:
    out: dict[str, float] = {}
    for metric in controller.metrics.api_requests.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                out[sample.labels["verb"]] = out.get(sample.labels["verb"], 0) + sample.value
    return out


def measure(nodes: int, pods: int, rate: float, warmup: float, duration: float) -> dict:
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(nodes, pods, rate, child), daemon=True)
    server.start()
    kubeconfig = parent.recv()
    metrics = Metrics()  # every request counted, as `gpu-policy controller` counts them
    plain = KubernetesCluster("k8s://", kubeconfig=kubeconfig)
    cluster = KubernetesCluster("k8s://", api_client=metrics.counted_client(plain.api_client.configuration))
    controller = Controller(cluster, ControllerSettings(), metrics=metrics)
    controller.start()
    loop = threading.Thread(target=controller.run, daemon=True)
    loop.start()
    while not controller.cache.synced or not controller.plans:
        time.sleep(0.1)
    parent.send("arrive")
    time.sleep(warmup)
    before, plans = requests_by_verb(controller), controller.plans
    time.sleep(duration)
    after, plans = requests_by_verb(controller), controller.plans - plans
    parent.send("stop")
    parent.send((warmup, warmup + duration))
    child_report = parent.recv()
    controller.stop.set()  # the controller first (it finishes its round, releases the Lease), then the server
    loop.join(timeout=120)
    logging.getLogger("gpu_policy.controller.informer").setLevel(logging.ERROR)  # the watches end with the server
    parent.send("stopped")
    server.join(timeout=60)
    lat = sorted(child_report["latencies"])
    per_minute = {verb: (after.get(verb, 0) - before.get(verb, 0)) * 60 / duration for verb in after}
    return {"p50": statistics.median(lat) if lat else None,
            "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None, "released": len(lat),
            "plans_per_s": plans / duration, "per_minute": per_minute,
            "answered_mib": child_report["bytes"] / 2 ** 20, "waiting_at_end": child_report["waiting"],
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def sizes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split("x")) for part in text.split(",") if part]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=sizes, default=sizes("1000x4200,5000x21000"), help="NODESxPODS,...")
    parser.add_argument("--rate", type=float, default=10.0, help="gated pods arriving per second (default 10)")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of arrivals before measuring")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of steady state measured")
    args = parser.parse_args()
    print(f"arrivals {args.rate:g}/s (and as many pods ending); {args.warmup:g} s warm-up, "
          f"{args.duration:g} s measured")
    for nodes, pods in args.sizes:
        m = measure(nodes, pods, args.rate, args.warmup, args.duration)
        verbs = ", ".join(f"{v} {n:.1f}" for v, n in sorted(m["per_minute"].items()) if n)
        p50 = f"{m['p50']:.2f}" if m["p50"] is not None else "-"
        p99 = f"{m['p99']:.2f}" if m["p99"] is not None else "-"
        print(f"{nodes} nodes / {pods} pods: release p50 {p50} s, p99 {p99} s ({m['released']} released, "
              f"{m['waiting_at_end']} gated at the end); {m['plans_per_s']:.2f} plans/s; "
              f"LISTs in steady state {m['per_minute'].get('list', 0) * args.duration / 60:.0f}; requests per minute: "
              f"{verbs or 'none'}; API server answered {m['answered_mib']:.1f} MiB during the arrivals "
              f"(watch streams excluded); controller peak memory {m['peak_mib']:.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
