"""Nodes of whole GPUs, and best-fit placement of one job on them.

The simulated cluster is a list of free GPU counts, one per node of
`GPUS_PER_NODE`. A job of at most one node's GPUs runs on one node; a larger job
is a gang that takes whole nodes. Which GPU indices a job holds does not matter
here: all GPUs are alike.
"""

from __future__ import annotations

from gpu_policy.sim.teams.trace import GPUS_PER_NODE, TraceJob


def best_fit(free: list[int], job: TraceJob, exclude: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
    """Where `job` goes with the least room left over: the fullest node that fits a
    one-node job, the lowest-numbered empty nodes for a gang. None when it fits
    nowhere. Nodes in `exclude` are not used."""
    need = job.gpus_per_replica
    if job.replicas == 1:
        best = None
        for node, room in enumerate(free):
            if room >= need and node not in exclude and (best is None or room < free[best]):
                best = node
        return None if best is None else (best,)
    empty = [n for n, room in enumerate(free) if room == GPUS_PER_NODE and n not in exclude]
    return tuple(empty[:job.replicas]) if len(empty) >= job.replicas else None


def take(free: list[int], job: TraceJob, nodes: tuple[int, ...]) -> None:
    for n in nodes:
        free[n] -= job.gpus_per_replica


def give_back(free: list[int], job: TraceJob, nodes: tuple[int, ...]) -> None:
    for n in nodes:
        free[n] += job.gpus_per_replica
