"""The baselines: static quotas and one FIFO queue, both without preemption.

Every policy answers `decide(view) -> Decision` (`gpu_policy.sim.teams.engine`);
`POLICIES` maps each name to a factory. Neither baseline blocks a queue behind a
job that does not fit: like Kubernetes' scheduler, a round skips it and tries the
next (the seed's "8-GPU job waits while 1-GPU jobs start" comes from exactly that).
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu_policy.sim.teams.cluster import best_fit, take
from gpu_policy.sim.teams.jobs import Decision, RoundView, SimJob
from gpu_policy.sim.teams.stopping import KUBERNETES


def start_in_order(view: RoundView, jobs: Iterable[SimJob], cap: dict[str, int] | None,
                   decision: Decision, held: dict[str, int] | None = None) -> None:
    """Start each job, in the order given, on its best-fitting nodes where it fits
    and its team stays within `cap` (no cap: None). Updates `view.free` and `held`."""
    held = view.held() if held is None else held
    for job in jobs:
        if cap is not None and held[job.team] + job.gpus > cap[job.team]:
            continue
        nodes = best_fit(view.free, job.spec)
        if nodes is not None:
            take(view.free, job.spec, nodes)
            held[job.team] += job.gpus
            decision.start[job.name] = nodes


class StaticPolicy:
    """Each team owns its quota of GPUs and nothing more: a namespace
    ResourceQuota per team. Oldest first, best fit. Teams without a quota never run."""

    name = "static"
    eviction = KUBERNETES  # it never evicts

    def decide(self, view: RoundView) -> Decision:
        decision = Decision()
        start_in_order(view, view.waiting, view.quotas, decision)
        return decision


class FifoPolicy:
    """One queue for everyone, no quotas: oldest first, best fit, never preempts."""

    name = "fifo"
    eviction = KUBERNETES  # it never evicts

    def decide(self, view: RoundView) -> Decision:
        decision = Decision()
        start_in_order(view, view.waiting, None, decision)
        return decision
