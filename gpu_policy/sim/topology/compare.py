"""Every policy on the same arrivals, seed by seed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpu_policy.errors import UsageError
from gpu_policy.sim.topology.bestfit import BestFitPolicy
from gpu_policy.sim.topology.cluster import Shape
from gpu_policy.sim.topology.engine import simulate
from gpu_policy.sim.topology.metrics import Metrics, measure
from gpu_policy.sim.topology.ours import PlannerPolicy
from gpu_policy.sim.topology.workload import generate

POLICIES = {"gpu-policy": PlannerPolicy, "best-fit": BestFitPolicy,
            "topology-blind": lambda: BestFitPolicy(blind=True)}


@dataclass(frozen=True)
class Protocol:
    shape: Shape
    jobs: int
    load: float
    round_s: float
    seeds: tuple[int, ...]
    policies: tuple[str, ...]


@dataclass
class Comparison:
    protocol: Protocol
    runs: list[Metrics]

    def of(self, policy: str) -> list[Metrics]:
        return [m for m in self.runs if m.policy == policy]


def parse_policies(text: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise UsageError(f"--policies: unknown policy {', '.join(unknown) or '(none)'}; "
                         f"choose from {', '.join(POLICIES)}")
    return tuple(dict.fromkeys(names))


def compare(protocol: Protocol, progress: Callable[[int, int], None] | None = None) -> Comparison:
    """Run each policy on each seed's arrivals (the same arrivals for every policy)."""
    out = Comparison(protocol, [])
    total = len(protocol.seeds) * len(protocol.policies)
    for seed in protocol.seeds:
        jobs = generate(protocol.shape, protocol.jobs, seed, protocol.load)
        for name in protocol.policies:
            run = simulate(POLICIES[name](), protocol.shape, jobs, protocol.round_s)
            out.runs.append(measure(run, seed))
            if progress:
                progress(len(out.runs), total)
    return out
