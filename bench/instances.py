"""Benchmark instances: the scale instance of bench/plan_scale.py, at any size.

At 1,000 nodes this is the instance every earlier figure in docs/benchmarks.md was
measured on (same generator, same seed).
"""

from __future__ import annotations

import random

GPUS_PER_NODE, QUEUES = 8, 10
#: the topology instance's racks and blocks (issue 39: 50 blocks x 10 racks x 10 nodes at 5,000 nodes)
NODES_PER_RACK, RACKS_PER_BLOCK = 10, 10
#: the share of jobs, running and waiting, that require a rack in the topology instance
RACK_JOBS = 0.05


def scale_instance(nodes: int = 1000, seed: int = 0, topology: bool = False, gangs: bool = False) -> dict:
    """`nodes` x 8 GPUs about 93% full: 4 running and 0.2 waiting jobs per node, 10 queues.

    Five queues borrow (70% of the running work), five come back for their share
    (80% of the waiting work), so most waiting work needs reclaim. With `topology`, nodes
    are labelled with their block and rack (`NODES_PER_RACK`, `RACKS_PER_BLOCK`), and 5% of
    the jobs require a rack (drawn apart from the rest, so the instance is otherwise the same;
    `without_topology` gives it back without); with `gangs` too, the waiting ones among them
    are gangs of 2 or 4 replicas.
    """
    rng = random.Random(seed)
    running, waiting = 4 * nodes, nodes // 5
    names = [f"node-{i:04d}" for i in range(nodes)]
    queues = [{"name": f"team-{q}", "deserved": nodes * GPUS_PER_NODE // QUEUES} for q in range(QUEUES)]
    free = [GPUS_PER_NODE] * nodes
    jobs, order = [], list(range(nodes))
    for i in range(running):
        gpus = rng.choices([1, 2, 4], weights=[45, 40, 15])[0]
        if i % 500 == 0:
            rng.shuffle(order)
        node = next((n for n in order if free[n] >= gpus), None)
        if node is None:
            gpus = 1
            node = next(n for n in order if free[n] >= 1)
        free[node] -= gpus
        queue = rng.randrange(5) if rng.random() < 0.7 else 5 + rng.randrange(5)
        jobs.append({"name": f"run-{i}", "queue": f"team-{queue}", "gpus": gpus, "running": [names[node]],
                     "priority": rng.choice([10, 50, 50, 50, 100]), "submitted_at": i,
                     "checkpoint_age_s": rng.randrange(60, 3600)})
    for i in range(waiting):
        queue = 5 + rng.randrange(5) if rng.random() < 0.8 else rng.randrange(5)
        jobs.append({"name": f"wait-{i}", "queue": f"team-{queue}", "gpus": rng.choice([1, 2, 4, 8]),
                     "submitted_at": running + i})
    out = {"nodes": [{"name": n, "gpus": GPUS_PER_NODE} for n in names], "queues": queues, "jobs": jobs}
    return _with_topology(out, seed, gangs) if topology else out


def _with_topology(instance: dict, seed: int, gangs: bool) -> dict:
    """Three levels, blocks, racks and the nodes themselves (Kueue's usual hostname level), and a
    rack required by `RACK_JOBS` of the jobs."""
    rng = random.Random(seed + 1)
    instance["topology"] = [{"name": "block", "label": "example.com/block"},
                            {"name": "rack", "label": "example.com/rack"},
                            {"name": "host", "label": "kubernetes.io/hostname"}]
    for i, node in enumerate(instance["nodes"]):
        rack = i // NODES_PER_RACK
        node["labels"] = {"example.com/block": f"block-{rack // RACKS_PER_BLOCK}", "example.com/rack": f"rack-{rack}"}
    for job in instance["jobs"]:
        if rng.random() < RACK_JOBS:
            job["topology"] = {"required": "rack"}
            if gangs and not job.get("running"):
                job["replicas"] = rng.choice([2, 4])
    return instance


def without_topology(instance: dict) -> dict:
    """The same instance with no topology: no levels, no job asking for one."""
    return {**{k: v for k, v in instance.items() if k != "topology"},
            "jobs": [{k: v for k, v in job.items() if k != "topology"} for job in instance["jobs"]]}


def gangs_instance(nodes: int = 1000, seed: int = 0) -> dict:
    """The topology instance with gangs waiting (`scale_instance(topology=True, gangs=True)`),
    its topology taken off: the scale instance with 5% of its waiting jobs gangs of 2 or 4
    replicas, which the planner sweeps (`plan_scale.py --gangs`, `plan_phases.py --gangs`)."""
    return without_topology(scale_instance(nodes, seed, topology=True, gangs=True))
