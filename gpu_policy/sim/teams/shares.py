"""Two rules the policies and the metrics share: each team's fair share of the
cluster now, and which teams are owed GPUs under their guarantee."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpu_policy import Job, Queue, Scenario, fair_shares


def team_fair_shares(quotas: Mapping[str, int], demand: Mapping[str, float], capacity: int) -> dict[str, int]:
    """Fair share of each team: its deserved quota up to its demand, then the rest
    water-filled by equal over-quota weights: gpu-policy's own rule
    (`gpu_policy.fair_shares`), which is also KAI-Scheduler's documented one."""
    queues = [Queue(team, deserved=quota) for team, quota in quotas.items()]
    jobs = [Job(f"demand-{team}", team, gpus=demand[team]) for team in quotas if demand.get(team, 0) > 0]
    return fair_shares(Scenario(nodes=[], queues=queues, jobs=jobs), capacity=capacity)


def owed_teams(quotas: Mapping[str, int], held: Mapping[str, int],
               waiting: Iterable[tuple[str, int]]) -> set[str]:
    """Teams below their guarantee: one of their waiting jobs (team, GPUs) would fit
    within the team's deserved quota beside what it holds. That is "holds less than
    min(demand, deserved)" counted in whole jobs: a team of 8-GPU jobs with a quota
    of 17 is not owed a third job."""
    return {team for team, gpus in waiting if held[team] + gpus <= quotas[team]}
