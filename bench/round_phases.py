"""Where a controller round's CPU goes at a cluster size, and the look alone (docs/benchmarks.md,
"Admission", "Where a round's time goes"), old against new in one run.

    .venv/bin/python bench/round_phases.py [--sizes 1000x4200,5000x21000] [--rounds 10] [--looks 10]
                                           [--baseline REV]

The cluster is bench/admission.py's: nodes of 8 GPUs, 4.2 one-GPU pods running per node (each
saying when it started), four queues.

The look alone: the controller's cache filled with the cluster, looked at again and again as
the controller looks (its memo keeps what did not change), 10 pods changing between looks (5
running pods ending, 5 gated ones arriving) and the clock a second on: the median process time
of --looks looks (`look`); the same when no pod says when it started (`look, no start times`: no
running job's ages to set anew); and when every look has a memo of its own, so makes everything
again (`look, nothing kept`).

A round: the fake API server with the cluster in a child process, with a stand-in scheduler that
binds each released pod; a `Controller` (the defaults of `gpu-policy controller`) synced from
it and leading. Each round 10 gated pods arrive and 10 running pods end, the controller takes in
their watch events, and `Controller.round()` runs; the process time of each phase is summed by
wrapping it (the look, the plan and in it the planner's scope, node kinds, running layout,
realize, solve and write-up, acting: releases and Events, the metrics, the GPUs each queue held
for the usage history). The mean of --rounds rounds
after two to warm up. Process time, so a shared machine inflates it less than wall time; the
informer's threads parse the watch events in the same process, so a round counts some of theirs.
With `--baseline`, the same script runs on the package at that git revision (bench/baseline.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

# the package first: under --baseline, PYTHONPATH's older one (bench/baseline.py), not this checkout's
import gpu_policy
from gpu_policy.controller.cache import CONFIG_MAPS, KAI_QUEUES, NAMESPACES, NODES, PODS, Cache
from gpu_policy.kubernetes import KubernetesSettings
from gpu_policy.kubernetes.read.look import look
from gpu_policy.kubernetes.read.memo import LookMemo
from gpu_policy.kubernetes.read.settle import DevicePluginLag
from gpu_policy.planner.gc_tuning import tune_gc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.admission import GPUS, TEAMS, Scheduler, _load, _pod, controller, sizes  # noqa: E402
from bench.baseline import revision, run_at_commit  # noqa: E402
from bench.plan_phases import instrument  # noqa: E402

#: (label, modules, function or Class.method) of a round; labels with leading spaces run inside the one above
PHASES = [
    ("look", ("gpu_policy.kubernetes.read.look",), "look"),
    ("plan", ("gpu_policy.actions.cycle",), "plan_observation"),
    ("  scope", ("gpu_policy.planner.core.scope",), "scope"),
    ("  node kinds", ("gpu_policy.planner.core.shapes",), "node_kinds"),
    ("  running layout", ("gpu_policy.model.layout",), "running_layout"),
    ("  realize", ("gpu_policy.planner.core.realize",), "realize"),
    ("  solve", ("gpu_policy.planner.core.solve",), "solve_stages"),
    ("  write-up (reasons)", ("gpu_policy.planner.writeup",), "write_plan"),
    ("act (releases, Events)", ("gpu_policy.controller.loop",), "Controller._act"),
    ("metrics", ("gpu_policy.controller.metrics",), "Metrics.show_queues"),
    ("usage held (the leader's history)", ("gpu_policy.controller.usage",), "held_after"),
]
T0 = 1_800_000_000.0  # the look's clock: what the pods' times are counted from


# -- the look alone ------------------------------------------------------------------------------
def _object(obj: dict, rv: int, uid: str | None = None) -> dict:
    """An object as the API server answers it: a resourceVersion, a uid, a creation time."""
    meta = {**obj["metadata"], "resourceVersion": str(rv), "uid": uid or obj["metadata"]["name"],
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 - 7200))}
    return {**obj, "metadata": meta}


class _Cluster:
    """bench/admission.py's cluster, as the controller's cache holds it after its LISTs."""

    def __init__(self, nodes: int, pods: int, started: bool):
        self.objects: list[dict] = []
        _load(self, nodes, pods)
        self.rv = len(self.objects)
        self.cache = Cache("nvidia.com/gpu")
        for kind, plural in ((NODES, "Node"), (PODS, "Pod"), (NAMESPACES, "Namespace"), (CONFIG_MAPS, "ConfigMap")):
            items = [_object(o, i) for i, o in enumerate(self.objects) if o["kind"] == plural]
            if not started:
                for o in items:
                    (o.get("status") or {}).pop("startTime", None)
            self.cache.replace(kind, items)
        self.cache.replace(KAI_QUEUES, None)
        self.running = [o["metadata"]["name"] for o in self.objects if o["kind"] == "Pod"]
        self.arrived = 0

    def put(self, obj: dict) -> None:  # _load's API server
        self.objects.append(obj)

    def change(self, rng: random.Random) -> None:
        """5 running pods end, 5 gated ones arrive."""
        for _ in range(5):
            gone = self.running.pop(rng.randrange(len(self.running)))
            self.cache.apply(PODS, "DELETED", {"metadata": {"namespace": "jobs", "name": gone}})
            self.rv += 1
            self.arrived += 1
            pod = _pod(f"new-{self.arrived}", f"team-{self.arrived % TEAMS}")
            self.cache.apply(PODS, "ADDED", _object(pod, self.rv))


def look_alone(nodes: int, pods: int, looks: int, started: bool = True, kept: bool = True) -> float:
    """The median process time of a look after 10 pods changed, the clock a second on."""
    cluster, rng = _Cluster(nodes, pods, started), random.Random(0)
    settings, lag = KubernetesSettings(), DevicePluginLag(KubernetesSettings().composition_settle_s)
    memo, now, spent = cluster.cache.memo, T0, []
    for i in range(looks + 2):  # two to warm up: the first makes everything
        cluster.change(rng)
        now += 1
        began = time.process_time()
        look(cluster.cache, settings, cluster.cache.node_views(), cluster.cache.pod_views(), now, "k8s://bench", lag,
             cluster.cache.bad(), None, memo if kept else LookMemo())
        if i >= 2:
            spent.append(time.process_time() - began)
    return statistics.median(spent)


# -- a round -------------------------------------------------------------------------------------
def serve(nodes: int, pods: int, conn) -> None:
    """The child: the API server, its cluster and the stand-in scheduler; 10 arrivals and 10
    endings for each "round" asked."""
    from tests.kubernetes.fake_api import FakeKubernetes

    rng = random.Random(0)
    with FakeKubernetes() as api:
        running = _load(api, nodes, pods)
        scheduler = Scheduler(api)
        conn.send(api.kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig"))
        arrived = 0
        while conn.recv() == "round":
            changed = []
            for _ in range(10):
                arrived += 1
                scheduler.created[f"new-{arrived}"] = time.monotonic()
                api.put(_pod(f"new-{arrived}", f"team-{rng.randrange(TEAMS)}"))
                gone = running.pop(rng.randrange(len(running)))
                api.delete("pods", gone, "jobs")
                changed += [f"new-{arrived}", gone]
            running.extend(scheduler.bound[len(scheduler.bound) - 10:])
            conn.send(changed)


def rounds(nodes: int, pods: int, count: int) -> dict[str, float]:
    """The mean process time of each phase of a round, over `count` rounds after two."""
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(nodes, pods, child), daemon=True)
    server.start()
    c = controller(parent.recv())
    c.start()
    while not (c.leading and c.cache.synced and c.plans):
        c.step()
        c.take_changes(0.1)
    spent: dict[str, float] = defaultdict(float)
    labels = instrument(spent, PHASES)
    samples = []
    for i in range(count + 2):
        parent.send("round")
        arrived, gone = (lambda names: (names[0::2], names[1::2]))(parent.recv())
        while not (all(c.cache.pod("jobs", n) for n in arrived) and not any(c.cache.pod("jobs", n) for n in gone)):
            c.take_changes(0.1)
        spent.clear()
        began = time.process_time()
        c.round()
        if i >= 2:
            samples.append({**spent, "round": time.process_time() - began})
    c.shut_down()  # the Lease given back, then the API server may go
    logging.getLogger("gpu_policy.controller.informer").setLevel(logging.ERROR)  # the watches end with the server
    parent.send("stop")
    server.join(timeout=60)
    return {key: statistics.mean(s.get(key, 0.0) for s in samples) for key in ["round", *(x.strip() for x in labels)]}


def measure(nodes: int, pods: int, count: int, looks: int) -> dict[str, float]:
    return {**rounds(nodes, pods, count), "look alone": look_alone(nodes, pods, looks),
            "look alone, no start times": look_alone(nodes, pods, looks, started=False),
            "look alone, nothing kept": look_alone(nodes, pods, looks, kept=False)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=sizes, default=sizes("1000x4200,5000x21000"), help="NODESxPODS,...")
    parser.add_argument("--rounds", type=int, default=10, help="rounds measured (after two)")
    parser.add_argument("--looks", type=int, default=10, help="looks measured, for the look alone (after two)")
    parser.add_argument("--baseline", metavar="REV", type=revision, help="also measure the package at this revision")
    parser.add_argument("--json", action="store_true", help="print each size's figures as one JSON line")
    args = parser.parse_args()
    tune_gc()  # as `gpu-policy controller` runs
    options = ["--rounds", str(args.rounds), "--looks", str(args.looks)]
    for nodes, pods in args.sizes:
        new = measure(nodes, pods, args.rounds, args.looks)
        if args.json:
            print(json.dumps(new), flush=True)
            continue
        old = run_at_commit(args.baseline, "round_phases.py", ["--sizes", f"{nodes}x{pods}", *options])[0] \
            if args.baseline else None
        print(f"{nodes} nodes / {pods} pods ({GPUS} GPUs a node): seconds of CPU per round (mean of {args.rounds}), "
              f"of a look (median of {args.looks})")
        print(f"{'':32} {'new':>7}" + (f" {'old':>7}" if old else "") + f"   (package {gpu_policy.__file__})")
        for label in ["round", *(label for label, _, _ in PHASES), "look alone", "look alone, no start times",
                      "look alone, nothing kept"]:
            key = label.strip()
            row = f"{label:32} {_cell(new.get(key))}" + (f" {_cell(old.get(key))}" if old else "")
            print(row, flush=True)
    return 0


def _cell(seconds: float | None) -> str:
    return f"{seconds:7.3f}" if seconds is not None else f"{'-':>7}"


if __name__ == "__main__":
    sys.exit(main())
