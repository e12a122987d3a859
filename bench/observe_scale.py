"""What observing a live cluster costs: the fake API server (tests/kubernetes/fake_api.py)
at 1,000 nodes / 4,200 pods (the seed talk's 4,000-workload scale) and at 5,000 nodes /
21,000 pods, read through the real kubernetes client.

Prints, per size: the API calls, objects and bytes of one observation, the seconds of one
observation and of one whole plan from the cluster (observe + plan; medians of --runs),
and how many requests went to Secrets. The fake server runs in its own process, so its
work (paging, JSON) counts as an API server's would. With --dra the cluster is DRA-only
(NVIDIA's DRA driver: a ResourceSlice per node, a ResourceClaim per pod; DeviceTaintRules
served, as in Kubernetes 1.37) and the requests of each kind are printed, for one observation
and for the controller's start (its informer: one paginated LIST per kind, then a WATCH per
kind; it lists nothing more until a 410). The figures go to docs/benchmarks.md with this
command:

    .venv/bin/python bench/observe_scale.py [--runs 5] [--sizes 1000x4200,5000x21000] [--plan-sizes ...]
                                            [--time-limit 60] [--dra]

Each plan's time budget is 60 s here (the CLI's default is 10 s), so that the timed plans
are whole on a busy machine too.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_policy import PlannerConfig  # noqa: E402
from gpu_policy.actions.cycle import observe, plan_observation  # noqa: E402
from gpu_policy.kubernetes import KubernetesCluster  # noqa: E402
from gpu_policy.model import Job, Node, Queue, Scenario  # noqa: E402

GPUS, QUEUES = 8, 10


def busy_cluster(nodes: int, pods: int, seed: int = 0) -> Scenario:
    """As bench/plan_scale.py, at any size: about 95% of the pods run (1, 2 or 4 GPUs, the
    cluster ~90% full; five queues borrow, five come back), the rest wait for 1-8 GPUs."""
    rng = random.Random(seed)
    waiting = pods // 21
    free, order, jobs = [GPUS] * nodes, list(range(nodes)), []
    for i in range(pods - waiting):
        gpus = rng.choices([1, 2, 4], weights=[45, 40, 15])[0]
        if i % 500 == 0:
            rng.shuffle(order)
        node = next((n for n in order if free[n] >= gpus), None) or next(n for n in order if free[n] >= 1)
        gpus = min(gpus, free[node])
        free[node] -= gpus
        queue = rng.randrange(5) if rng.random() < 0.7 else 5 + rng.randrange(5)
        jobs.append(Job(name=f"run-{i}", queue=f"team-{queue}", gpus=gpus, running=[f"node-{node}"],
                        priority=rng.choice([10, 50, 50, 50, 100]), submitted_at=i,
                        checkpoint_age_s=rng.randrange(60, 3600)))
    for i in range(waiting):
        queue = 5 + rng.randrange(5) if rng.random() < 0.8 else rng.randrange(5)
        jobs.append(Job(name=f"wait-{i}", queue=f"team-{queue}", gpus=rng.choice([1, 2, 4, 8]), submitted_at=pods + i))
    return Scenario(nodes=[Node(name=f"node-{n}", gpus=GPUS, cpu=96, memory_gib=1024) for n in range(nodes)],
                    queues=[Queue(f"team-{q}", deserved=nodes * GPUS // QUEUES) for q in range(QUEUES)], jobs=jobs)


def serve(nodes: int, pods: int, dra: bool, conn) -> None:
    """In the child process: load the cluster into a fake API server and serve it until told to
    stop. "reset" forgets the requests so far; "count" answers those since the last reset (the
    requests to Secrets, and the requests by verb and kind) and forgets them."""
    from tests.kubernetes.dra_objects import load_dra, serve_taint_rules
    from tests.kubernetes.fake_api import FakeKubernetes
    from tests.kubernetes.objects import load_into

    with FakeKubernetes() as api:
        (load_dra if dra else load_into)(api, busy_cluster(nodes, pods), time.time())
        if dra:
            serve_taint_rules(api)
        conn.send((api.url, api.kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")))
        while (command := conn.recv()) != "stop":
            if command == "count":
                per_kind: dict[str, int] = {}
                for r in api.requests:
                    what = f"{r.verb} {r.resource.lstrip('/')}"
                    per_kind[what] = per_kind.get(what, 0) + 1
                conn.send((sum(1 for r in api.requests if "secrets" in r.path), per_kind))
            else:
                conn.send("ok")
            api.reset_log()


def controller_start(cluster: KubernetesCluster) -> None:
    """What the controller's informer sends when it starts: a LIST of every kind it watches
    (each paginated), then a WATCH of each kind served, ended at once."""
    from gpu_policy.controller.cache import CONFIG_MAPS, DRA_AND_POD_GROUPS, NAMESPACES, NODES, PODS
    from gpu_policy.controller.informer import Informer
    from gpu_policy.kubernetes.transport.client import KubeClient

    stop = threading.Event()
    informer = Informer(KubeClient(cluster.api_client, cluster.url, cluster.settings),
                        [NODES, PODS, NAMESPACES, CONFIG_MAPS, *DRA_AND_POD_GROUPS], queue.Queue(), stop,
                        watch_timeout_s=1.0)
    informer.start()
    stop.set()
    informer.join(30.0)


def measure(nodes: int, pods: int, runs: int, plan_runs: int, config: PlannerConfig, dra: bool = False) -> dict:
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(nodes, pods, dra, child), daemon=True)
    server.start()
    try:
        _, kubeconfig = parent.recv()
        cluster = KubernetesCluster("k8s://", kubeconfig=kubeconfig)
        looks = []
        for _ in range(runs):
            parent.send("reset")
            parent.recv()
            began = time.perf_counter()
            obs = observe(cluster)
            looks.append((time.perf_counter() - began, obs.observed))
        parent.send("count")  # the last observation's requests
        secrets, per_kind = parent.recv()
        plans = []
        for _ in range(plan_runs):
            began = time.perf_counter()
            result = plan_observation(observe(cluster), config)
            plans.append((time.perf_counter() - began, result))
        started = None
        if dra:
            parent.send("reset")
            parent.recv()
            controller_start(cluster)
            parent.send("count")
            started = parent.recv()[1]
        parent.send("stop")
    finally:
        server.join(timeout=30)
    observed = looks[-1][1]
    return {"nodes": nodes, "pods": pods, "api_calls": observed["api_calls"], "objects": observed["objects"],
            "bytes": observed["bytes"], "observe_s": statistics.median(t for t, _ in looks),
            "plan_s": statistics.median(t for t, _ in plans) if plans else None,
            "plan": plans[-1][1] if plans else None, "secrets": secrets, "per_kind": per_kind,
            "controller_start": started}


def _by_kind(counts: dict[str, int]) -> str:
    return ", ".join(f"{what} {n}" for what, n in sorted(counts.items()))


def sizes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split("x")) for part in text.split(",") if part]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="observations per size (median)")
    parser.add_argument("--sizes", type=sizes, default=sizes("1000x4200,5000x21000"), help="NODESxPODS,...")
    parser.add_argument("--plan-sizes", type=sizes, default=sizes("1000x4200,5000x21000"),
                        help="sizes at which whole plans are timed too (NODESxPODS,...)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="each plan's time budget in seconds (default 60)")
    parser.add_argument("--dra", action="store_true", help="a DRA-only cluster; prints the requests per kind")
    args = parser.parse_args()
    config = PlannerConfig(time_limit_s=args.time_limit)
    print(f"fake API server in its own process, page size 500; median of {args.runs}; "
          f"plan time budget {args.time_limit:g} s")
    print("nodes    pods  API calls  objects     MiB  observe s  plan s  secrets  plan")
    for nodes, pods in args.sizes:
        m = measure(nodes, pods, args.runs, args.runs if (nodes, pods) in args.plan_sizes else 0, config, args.dra)
        plan = m["plan"]
        what = (f"{plan.summary['starts']} starts, {plan.summary['preemptions']} preemptions, {plan.solver.status}"
                if plan else "-")
        plan_s = f"{m['plan_s']:.2f}" if m["plan_s"] is not None else "-"
        print(f"{nodes:5d} {pods:7d} {m['api_calls']:10d} {m['objects']:8d} {m['bytes'] / 2 ** 20:7.1f} "
              f"{m['observe_s']:10.2f} {plan_s:>7} {m['secrets']:8d}  {what}", flush=True)
        if args.dra:
            print("  one observation, requests by kind: " + _by_kind(m["per_kind"]))
            print("  the controller's start, requests by kind: " + _by_kind(m["controller_start"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
