"""The arrivals: gangs and single pods with the topology requests a real cluster's jobs
carry, drawn by a seeded generator (docs/simulate.md, "simulate topology")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_policy.sim.topology.cluster import Shape


@dataclass(frozen=True)
class Gang:
    """One job: `replicas` pods of `gpus` GPUs each, all started at once."""
    name: str
    arrival_s: float
    duration_s: float
    replicas: int
    gpus: int
    required: str | None = None   # level name: every replica in one domain of it
    preferred: str | None = None  # level name: as few domains of it as can hold the replicas

    @property
    def total_gpus(self) -> int:
        return self.replicas * self.gpus

    @property
    def is_gang(self) -> bool:
        return self.replicas > 1


#: The mix: (share, kind, replicas as nodes-per-rack fractions or pod sizes). Kinds:
#: single pods of 1, 2, 4 or 8 GPUs; gangs of whole nodes asking `required: rack`,
#: `required: block` + `preferred: rack`, `preferred: rack`, or nothing.
MIX = (
    (0.40, "single"),
    (0.25, "required-rack"),
    (0.10, "required-block-preferred-rack"),
    (0.15, "preferred-rack"),
    (0.10, "none"),
)
SINGLE_GPUS = (1, 2, 4, 8)
#: Mean seconds a job runs (lognormal, sigma 1): two hours.
MEAN_DURATION_S = 7200.0
DURATION_SIGMA = 1.0


def generate(shape: Shape, jobs: int, seed: int, load: float) -> list[Gang]:
    """`jobs` arrivals, Poisson, at the rate that asks `load` times the cluster's GPUs on
    average; durations lognormal around `MEAN_DURATION_S`."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(len(MIX), size=jobs, p=[share for share, _ in MIX])
    specs = [_shape_of(MIX[k][1], shape, rng) for k in kinds]
    mean_gpus = sum(r * g for r, g, _, _ in specs) / max(1, jobs)
    rate = load * shape.total_gpus / (mean_gpus * MEAN_DURATION_S)
    arrivals = np.cumsum(rng.exponential(1 / rate, size=jobs))
    mu = np.log(MEAN_DURATION_S) - DURATION_SIGMA ** 2 / 2
    durations = rng.lognormal(mu, DURATION_SIGMA, size=jobs)
    return [Gang(f"job-{i}", round(float(arrivals[i]), 1), max(60.0, round(float(durations[i]), 1)), *specs[i])
            for i in range(jobs)]


def _shape_of(kind: str, shape: Shape, rng: np.random.Generator) -> tuple[int, int, str | None, str | None]:
    """(replicas, GPUs each, required, preferred) of one job of `kind`."""
    rack, block = shape.nodes_per("rack"), shape.nodes_per("block")
    if kind == "single":
        return 1, int(rng.choice([g for g in SINGLE_GPUS if g <= shape.gpus] or [shape.gpus])), None, None
    if kind == "required-rack":
        return int(rng.integers(min(2, rack), rack + 1)), shape.gpus, "rack", None
    if kind == "required-block-preferred-rack":
        return int(rng.integers(rack // 2 + 1, min(block, 2 * rack) + 1)), shape.gpus, "block", "rack"
    if kind == "preferred-rack":
        return int(rng.integers(min(2, rack), rack + 1)), shape.gpus, None, "rack"
    return int(rng.integers(2, max(2, rack // 2) + 1)), shape.gpus, None, None
