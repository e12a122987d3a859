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


def random_queues(rng: random.Random, departments: list[int], leaves: tuple[int, int]) -> list[dict]:
    """Departments d0.. (as many as one of `departments`) and queues q0.. (from `leaves[0]` to
    `leaves[1]`; most of them in a department, where there are any) with random deserved
    quotas, weights (0 too), limits and tiers."""
    names = [f"d{i}" for i in range(rng.choice(departments))]
    queues = [{"name": d, "deserved": rng.randint(0, 8), "over_quota_weight": rng.choice([0, 1, 2])} for d in names]
    for i in range(rng.randint(*leaves)):
        queue = {"name": f"q{i}", "deserved": rng.randint(0, 6), "over_quota_weight": rng.choice([0, 1, 1, 2])}
        if names and rng.random() < 0.7:
            queue["parent"] = rng.choice(names)
        if rng.random() < 0.15:
            queue["limit"] = rng.randint(2, 10)
        if rng.random() < 0.15:
            queue["priority"] = 1
        queues.append(queue)
    return queues


def rich_scenario(seed: int) -> dict:
    """A small random cluster with every feature the rules know: departments, queue tiers
    and limits, gangs, fractions, priorities, non-preemptible jobs, GPU models, CPUs,
    checkpoint ages. Running jobs are placed so that the snapshot is valid."""
    rng = random.Random(seed)
    models = ["A", "B"] if rng.random() < 0.3 else [None]
    nodes = []
    for i in range(rng.randint(2, 5)):
        node = {"name": f"n{i}", "gpus": rng.choice([2, 4, 8])}
        if models[0]:
            node["gpu_model"] = rng.choice(models)
        if rng.random() < 0.3:
            node["cpu"] = rng.choice([16, 32, 64])
        nodes.append(node)
    queues = random_queues(rng, [0, 0, 1, 2], (2, 4))
    leaves = [q["name"] for q in queues if q["name"].startswith("q")]
    free = {n["name"]: n["gpus"] for n in nodes}
    cpu = {n["name"]: n.get("cpu", 10**6) for n in nodes}
    shared: dict[str, list[float]] = {n["name"]: [] for n in nodes}  # room left on GPUs opened for fractions
    jobs = []
    for i in range(rng.randint(4, 14)):
        gpus = rng.choice([0.25, 0.5, 0.5, 1, 1, 2, 4])
        replicas = rng.choice([1, 1, 1, 2, 3])
        job = {"name": f"j{i}", "queue": rng.choice(leaves), "gpus": gpus, "replicas": replicas,
               "priority": rng.choice([10, 50, 50, 100]), "submitted_at": i,
               "checkpoint_age_s": rng.choice([60, 600, 3000])}
        if rng.random() < 0.1:
            job["preemptible"] = rng.choice([True, False])
        if models[0] and rng.random() < 0.3:
            job["gpu_model"] = rng.choice(models)
        if rng.random() < 0.3:
            job["cpu"] = rng.choice([1, 4, 8])
        if rng.random() < 0.5:
            where = _place(rng, nodes, job, free, cpu, shared)
            if where:
                job["running"] = where
        jobs.append(job)
    return {"nodes": nodes, "queues": queues, "jobs": jobs}


def _place(rng: random.Random, nodes: list[dict], job: dict, free: dict, cpu: dict, shared: dict) -> list[str] | None:
    """Nodes for each replica of a running job, updating what is left; None if it fits nowhere."""
    want = job.get("cpu", 0)
    hosts = [n["name"] for n in nodes if job.get("gpu_model") in (None, n.get("gpu_model"))]
    where = []
    for _ in range(job["replicas"]):
        fits = [n for n in hosts if cpu[n] >= want and (
            free[n] >= job["gpus"] if job["gpus"] >= 1 else
            (any(r >= job["gpus"] for r in shared[n]) or free[n] >= 1))]
        if not fits:
            return None
        n = rng.choice(fits)
        cpu[n] -= want
        if job["gpus"] >= 1:
            free[n] -= job["gpus"]
        else:
            spot = next((k for k, r in enumerate(shared[n]) if r >= job["gpus"]), None)
            if spot is None:
                free[n] -= 1
                shared[n].append(1.0)
                spot = len(shared[n]) - 1
            shared[n][spot] -= job["gpus"]
        where.append(n)
    return where
