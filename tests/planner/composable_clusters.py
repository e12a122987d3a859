"""Seeded random composable clusters: the rich random clusters of random_clusters.py with a
`composable:` section (GPU composition, docs/composition.md), for the invariant and
stability tests."""

from __future__ import annotations

import random

from tests.planner.random_clusters import rich_scenario


def composable_scenario(seed: int) -> dict:
    """A rich random cluster where one to three nodes may take pool GPUs (some already
    hold attached GPUs, their highest indices), sometimes with a CPU node that takes any
    model; pools of each model; attach before or after reclaim; idle_detach_s below or
    above the hour that simulated telemetry traces."""
    rng = random.Random(10_000 + seed)
    s = rich_scenario(10_000 + seed)
    models = sorted({n.get("gpu_model") for n in s["nodes"]} - {None}) or ["A"]
    for node in s["nodes"]:
        node.setdefault("gpu_model", models[0])
    spots = []
    for node in rng.sample(s["nodes"], rng.randint(1, min(3, len(s["nodes"])))):
        spot = {"name": node["name"], "max_gpus": node["gpus"] + rng.choice([0, 2, 4, 8])}
        if rng.random() < 0.4:
            spot["attached"] = rng.randint(1, node["gpus"])
        spots.append(spot)
    if rng.random() < 0.3:
        s["nodes"].append({"name": "cpu-node", "gpus": 0, "cpu": 64})
        spots.append({"name": "cpu-node", "max_gpus": rng.choice([2, 4, 8])})
    s["composable"] = {
        "pools": [{"model": m, "free": rng.choice([0, 1, 2, 4, 8])} for m in models],
        "nodes": spots,
        "before_preemption": rng.random() < 0.7,
        "idle_detach_s": rng.choice([600, 1800, 7200]),
    }
    return s
