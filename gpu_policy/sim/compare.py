"""Run several policies over several seeds of the inflation experiment, in
parallel processes, and summarise them per policy."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

import numpy as np

from gpu_policy.errors import UsageError
from gpu_policy.sim.inflation import RunResult, run, stream_bound
from gpu_policy.sim.openb import NodeList, PodList
from gpu_policy.sim.ours import OursPolicy
from gpu_policy.sim.policies import BestFitPolicy, FgdPolicy, Policy, RandomPolicy, SpreadPolicy
from gpu_policy.sim.variants import Variant, derive

POLICIES: dict[str, Callable[[], Policy]] = {
    "random": RandomPolicy,
    "spread": SpreadPolicy,
    "best-fit": BestFitPolicy,
    "fgd": FgdPolicy,
    "ours-online": lambda: OursPolicy(batched=False),
    "ours-batched": lambda: OursPolicy(batched=True),
}


@dataclass
class PolicySummary:
    policy: str
    ratio_mean: float
    ratio_min: float
    ratio_max: float
    latency_p50_ms: float
    latency_p95_ms: float
    per: str                # "pod" or "window of W"
    runs: list[RunResult]


@dataclass
class Comparison:
    policies: list[PolicySummary]
    bounds: dict[int, float]       # seed -> best allocation ratio any policy could reach
    nodes: int
    gpus: int
    seeds: list[int]
    inflate: float
    window: int
    variants: list[Variant] = field(default_factory=list)

    @property
    def workload(self) -> str:
        """The pod list compared: 'default', or its variants ('gpuspec:0.33')."""
        return ",".join(map(str, self.variants)) or "default"


def parse_policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise UsageError(f"--policies: unknown policy {unknown[0]!r}; choose from {', '.join(POLICIES)}"
                         if unknown else "--policies: name at least one policy")
    return names


#: Most seeds one comparison takes, and the largest seed.
MAX_SEEDS, MAX_SEED = 10_000, 2 ** 32 - 1


def parse_seeds(text: str) -> list[int]:
    """'0-4' or '1,3,7' (or a mix) as a sorted list of at most `MAX_SEEDS` seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or len(low) > 10 or len(high) > 10:
            raise UsageError(f"--seeds: expected a range like 0-4 or a list like 1,3, got {text!r}")
        first, last = int(low), int(high or low)
        if last < first or last > MAX_SEED:
            raise UsageError(f"--seeds: each range must go up, within 0-{MAX_SEED}, got {part.strip()!r}")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise UsageError(f"--seeds: at most {MAX_SEEDS:,} seeds, got more in {text[:40]!r}")
        seeds.update(range(first, last + 1))
    return sorted(seeds)


def _one(nodes: NodeList, pods: PodList, policy: str, seed: int, inflate: float, window: int,
         variants: list[Variant]) -> RunResult:
    return run(nodes, derive(nodes, pods, variants, seed), POLICIES[policy](), seed, inflate, window)


def compare(nodes: NodeList, pods: PodList, policies: list[str], seeds: list[int], inflate: float = 1.0,
            window: int = 32, workers: int | None = None,
            progress: Callable[[int, int], None] | None = None, variants: list[Variant] = ()) -> Comparison:
    """Every policy on every seed; `progress(done, total)` after each run. With
    `variants`, each seed runs on its own derived pod list (`variants.derive`)."""
    variants = list(variants)
    tasks = [(p, s) for p in policies for s in seeds]
    workers = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    results: dict[tuple[str, int], RunResult] = {}
    if workers == 1:
        for i, (p, s) in enumerate(tasks, 1):
            results[p, s] = _one(nodes, pods, p, s, inflate, window, variants)
            if progress:
                progress(i, len(tasks))
    else:
        with ProcessPoolExecutor(workers) as pool:
            futures = {pool.submit(_one, nodes, pods, p, s, inflate, window, variants): (p, s) for p, s in tasks}
            for i, future in enumerate(as_completed(futures), 1):
                results[futures[future]] = future.result()
                if progress:
                    progress(i, len(tasks))
    summaries = []
    for p in policies:
        runs = [results[p, s] for s in seeds]
        ratios = [r.allocation_ratio for r in runs]
        latencies = np.concatenate([r.latencies_s for r in runs]) * 1000
        batched = POLICIES[p]().batched
        summaries.append(PolicySummary(p, float(np.mean(ratios)), min(ratios), max(ratios),
                                       float(np.percentile(latencies, 50)), float(np.percentile(latencies, 95)),
                                       f"window of {window}" if batched else "pod", runs))
    bounds = {s: stream_bound(nodes, derive(nodes, pods, variants, s), s, inflate) for s in seeds}
    return Comparison(summaries, bounds, len(nodes.names), nodes.gpu_capacity, seeds, inflate, window, variants)
