"""Settings of the planner, each with its unit and the reason for its default."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_policy.packing.fragmentation import WorkloadMix

SOLVERS = ("cbc", "highs")


@dataclass
class PlannerConfig:
    solver: str = "cbc"
    """``cbc`` (bundled with PuLP, always there) or ``highs`` (needs ``highspy``;
    in-process, so it skips writing the model to a file: faster on large clusters)."""

    time_limit_s: float = 10.0
    """Seconds each solver stage may run. A stage that hits it keeps the best
    solution found and the Plan's solver status says so."""

    gap_rel: float = 0.0
    """Relative optimality gap at which a stage stops. 0 means proven optimal,
    which keeps plans reproducible."""

    threads: int = 1
    """Solver threads. One thread makes runs deterministic."""

    candidate_nodes_per_job: int = 4
    """Most nodes the program considers for one waiting job on clusters larger
    than `exact_nodes`: the best-fitting nodes with room and the cheapest to
    reclaim, judged after earlier jobs' greedy reservations. On the scale
    benchmark 4 starts 198 of 200 waiting jobs and 16 starts 200, but 8 or more
    make the preemption stages 5-30 times slower (docs/benchmarks.md)."""

    exact_nodes: int = 16
    """Clusters with at most this many nodes are searched whole: every node is a
    candidate for every job, so small clusters get exactly optimal plans."""

    default_checkpoint_age_s: float = 1800.0
    """Work a job loses when preempted, in seconds since its last checkpoint,
    assumed when a job does not say (half an hour: a common checkpoint interval)."""

    max_moves: int = 4
    """Most running jobs one plan may restart elsewhere (consolidation moves) so
    that a waiting job that fits nowhere gets a node. 0 turns moves off."""

    workload_mix: WorkloadMix | None = None
    """The expected workload the packing stage keeps room for (`gpu_policy.packing`).
    None: the scenario's own jobs, running and waiting, each counted once."""

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
