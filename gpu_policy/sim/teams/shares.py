"""What each team is owed, by the planner's own rules: its fair share of the cluster now,
and which teams are owed GPUs under their guarantee."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpu_policy.model import EPS, Job, Queue, Scenario
from gpu_policy.planner.core.fair_share import fair_shares
from gpu_policy.planner.core.queues import Shares


def team_shares(quotas: Mapping[str, int], demand: Mapping[str, float], capacity: int) -> Shares:
    """Each team as a queue with its deserved quota and its demand, judged by the planner's
    vocabulary (`Shares`): the guarantee min(deserved, demand), and the fair share,
    the deserved quota up to the demand then the rest water-filled by equal over-quota
    weights (`gpu_policy.fair_shares`, which is also KAI-Scheduler's documented rule),
    past usage not counted: what each team is entitled to on this demand alone."""
    queues = [Queue(team, deserved=quota) for team, quota in quotas.items()]
    jobs = [Job(f"demand-{team}", team, gpus=demand[team]) for team in quotas if demand.get(team, 0) > 0]
    scenario = Scenario(nodes=[], queues=queues, jobs=jobs)
    return Shares.of(scenario, fair_shares(scenario, capacity=capacity, with_usage=False))


def owed_teams(shares: Shares, held: Mapping[str, int], waiting: Iterable[tuple[str, int]]) -> set[str]:
    """Teams below their guarantee, counted in whole jobs: one of their waiting jobs (team,
    GPUs) would keep the team within its guarantee (`shares`, judged on a demand that counts
    the waiting jobs) beside what it holds. A team of 8-GPU jobs with a quota of 17 is not
    owed a third job."""
    return {team for team, gpus in waiting if held[team] + gpus <= shares.guarantee[team] + EPS}
