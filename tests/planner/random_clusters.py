"""Seeded random clusters for the invariant, stability and quality checks.

`random_scenario` is the generator the stability tests and bench/plan_quality.py
have used since the first planner (keep it as it is: recorded figures depend on it).
"""

from __future__ import annotations

import random


def random_scenario(seed: int, nodes_range: tuple[int, int] = (2, 5), jobs_range: tuple[int, int] = (4, 14)) -> dict:
    """Three flat queues, whole and half-GPU jobs, gangs of two, priorities 10-100, CPUs."""
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "gpus": rng.choice([4, 8]), "cpu": 64} for i in range(rng.randint(*nodes_range))]
    queues = [{"name": f"q{i}", "deserved": rng.randint(0, 8), "over_quota_weight": rng.choice([0, 1, 2])}
              for i in range(3)]
    free = {n["name"]: n["gpus"] for n in nodes}
    cpu = {n["name"]: 64 for n in nodes}
    jobs = []
    for i in range(rng.randint(*jobs_range)):
        gpus = rng.choice([0.5, 1, 2, 4])
        replicas = rng.choice([1, 1, 2])
        job = {"name": f"j{i}", "queue": rng.choice(queues)["name"], "gpus": gpus, "replicas": replicas,
               "priority": rng.choice([10, 50, 50, 100]), "submitted_at": i, "cpu": rng.choice([1, 8])}
        hosts = [n for n in free if free[n] >= gpus and cpu[n] >= job["cpu"]]
        if rng.random() < 0.5 and hosts and gpus >= 1:
            where = [rng.choice(hosts) for _ in range(replicas)]
            if all(free[w] >= gpus * where.count(w) and cpu[w] >= job["cpu"] * where.count(w) for w in set(where)):
                for w in where:
                    free[w] -= gpus
                    cpu[w] -= job["cpu"]
                job["running"] = where
        jobs.append(job)
    return {"nodes": nodes, "queues": queues, "jobs": jobs}
