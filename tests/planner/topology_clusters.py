"""Random clusters of blocks and racks for the topology rule's tests: nodes filled at random
with running single-node jobs, and waiting jobs of one, two or four replicas that require a
rack, require a block and prefer a rack, prefer a rack, or ask for nothing."""

from __future__ import annotations

import random


def topology_cluster(seed: int, blocks: int = 4, racks: int = 4, nodes: int = 4, gpus: int = 8, fill: float = 0.7,
                     waiting: int = 12) -> dict:
    """`blocks` x `racks` x `nodes` nodes of `gpus` GPUs, about `fill` full, two queues."""
    rng = random.Random(seed)
    out = {"topology": [{"name": "block", "label": "example.com/block"}, {"name": "rack", "label": "example.com/rack"}],
           "nodes": [], "queues": [{"name": "a", "deserved": blocks * racks * nodes * gpus // 2}, {"name": "b"}],
           "jobs": []}
    names = []
    for b in range(blocks):
        for r in range(racks):
            for n in range(nodes):
                name = f"n{b}-{r}-{n}"
                names.append(name)
                out["nodes"].append({"name": name, "gpus": gpus,
                                     "labels": {"example.com/block": f"b{b}", "example.com/rack": f"r{r}"}})
    free = {n: gpus for n in names}
    i = 0
    while sum(free.values()) > (1 - fill) * gpus * len(names):
        node, size = rng.choice(names), rng.choice([1, 2, 4, 8])
        if free[node] >= size:
            free[node] -= size
            i += 1
            out["jobs"].append({"name": f"run-{i}", "queue": rng.choice("ab"), "gpus": size, "running": [node],
                                "checkpoint_age_s": rng.randint(0, 3000)})
    for k in range(waiting):
        job = {"name": f"w-{k}", "queue": rng.choice("ab"), "gpus": rng.choice([4, 8]), "replicas": rng.choice([1, 2, 4]),
               "submitted_at": k}
        draw = rng.random()
        if draw < 0.4:
            job["topology"] = {"required": "rack"}
        elif draw < 0.6:
            job["topology"] = {"required": "block", "preferred": "rack"}
        elif draw < 0.8:
            job["topology"] = {"preferred": "rack"}
        out["jobs"].append(job)
    return out
