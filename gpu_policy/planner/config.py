"""Settings of the planner, each with its unit and the reason for its default."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from gpu_policy.packing.fragmentation import WorkloadMix

SOLVERS = ("highs", "cbc")

#: Of the budget, the most the first plan may use when its compositions could change the
#: capacity its fair shares count: the rest is the plan made again with the GPUs they leave.
FIRST_PASS_SHARE = 2 / 3


@dataclass
class PlannerConfig:
    solver: str = "highs"
    """``highs`` (HiGHS through ``highspy``, installed with gpu-policy: in-process, so the
    model is handed over once for all stages; the faster on every benchmark instance,
    docs/benchmarks.md) or ``cbc`` (bundled with PuLP; a process per stage)."""

    time_limit_s: float = 10.0
    """Seconds for the whole plan: reading the snapshot, building the program, solving
    every stage and writing the Plan. A plan cut off keeps the best solution found (at
    worst: keep every running job, start nothing) and its solver status says
    ``feasible (time limit)``. A plan whose compositions change the GPUs its fair shares
    count is made again with the GPUs they leave; the first plan then gets at most
    `FIRST_PASS_SHARE` of the budget, and the plan made again at least the rest, even
    when the first overran its share."""

    gap_rel: float = 0.0
    """Relative optimality gap at which a stage stops. 0 means proven optimal,
    which keeps plans reproducible."""

    threads: int = 1
    """Solver threads. One thread makes runs deterministic."""

    candidate_nodes_per_job: int = 2
    """On clusters larger than `exact_nodes`: how many reclaim nodes each waiting replica
    that free GPUs cannot hold brings into the program (the cheapest to reclaim first).
    The first is reserved for it in the greedy pass; the others give the program a choice
    (docs/benchmarks.md measures 1-4)."""

    exact_nodes: int = 16
    """Clusters with at most this many nodes are decided whole: every node has its own
    variables and every legal victim is a candidate, so small clusters get exactly
    optimal plans."""

    default_checkpoint_age_s: float = 1800.0
    """Work a job loses when preempted, in seconds since its last checkpoint,
    assumed when a job does not say (half an hour: a common checkpoint interval)."""

    max_moves: int = 4
    """Most running jobs one plan may restart elsewhere (moves instead of preemptions,
    or to gather free GPUs into a block). 0 turns moves off."""

    workload_mix: WorkloadMix | None = None
    """The expected workload the packing stage keeps room for (`gpu_policy.packing`).
    None: the scenario's own jobs, running and waiting, each counted once."""

    clock: Callable[[], float] = field(default=time.perf_counter, repr=False, compare=False)
    """Seconds, for the budget (`time.perf_counter`); tests inject a fake one to squeeze
    the budget without depending on the machine's load."""

    def validate(self) -> None:
        if self.solver not in SOLVERS:
            raise ValueError(f"solver: must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        for name in ("time_limit_s", "candidate_nodes_per_job", "exact_nodes", "threads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)!r}")
        if self.max_moves < 0:
            raise ValueError(f"max_moves: must be >= 0, got {self.max_moves!r}")
        if not 0 <= self.gap_rel < 1:
            raise ValueError(f"gap_rel: must be in [0, 1), got {self.gap_rel!r}")
