"""Benchmark instances: the scale instance of bench/plan_scale.py, at any size.

At 1,000 nodes this is the instance every earlier figure in docs/benchmarks.md was
measured on (same generator, same seed).
"""

from __future__ import annotations

import random

GPUS_PER_NODE, QUEUES = 8, 10


def scale_instance(nodes: int = 1000, seed: int = 0) -> dict:
    """`nodes` x 8 GPUs about 93% full: 4 running and 0.2 waiting jobs per node, 10 queues.

    Five queues borrow (70% of the running work), five come back for their share
    (80% of the waiting work), so most waiting work needs reclaim.
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
    return {"nodes": [{"name": n, "gpus": GPUS_PER_NODE} for n in names], "queues": queues, "jobs": jobs}
