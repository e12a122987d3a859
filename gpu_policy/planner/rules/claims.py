"""Claims before borrowing and who starts first: the guarantee tier before fair share,
then the smallest relative share; how much of a queue's work counts toward its share."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpu_policy.model import Job
from gpu_policy.planner.codes import Reason
from gpu_policy.planner.rules.vocabulary import EPS, GUARANTEE, QueueTree, Shares, cap

if TYPE_CHECKING:
    from gpu_policy.planner.reasons import Judged


def why_wait(job: Job, judged: Judged) -> Reason | None:
    """Claims come first: a queue that reclaims GPUs in the guarantee tier starts only
    within its deserved quota, and a start above a queue's fair share may use only free GPUs
    that no queue within its share could use (with no room free, the room's reason says so)."""
    j, q = judged, job.queue
    room = j.no_room(job)
    if room is None and j.receiving.get(q) == GUARANTEE:
        return Reason("ClaimsWithinDeserved",
                      f"{q} takes GPUs from other queues in this plan (guarantee tier), so its claims end "
                      f"within its deserved quota of {cap(j.shares, q, GUARANTEE):g}: it holds {j.after[q]:g} "
                      "GPUs after this plan")
    after = j.after[q] + job.total_gpus
    if after <= j.shares.fair[q] + EPS:
        return None
    beyond = (f"{q} holds {j.after[q]:g} GPUs after this plan; with it {after:g}, above its fair share of "
              f"{j.shares.fair[q]}, so it may use only free GPUs that no queue within its share could use")
    return Reason("ClaimsBeforeBorrowing", beyond) if room is None else Reason(room.code, f"{room.text}; {beyond}")


def relative_share(allocated: float, gpus: float, deserved: float, fair: float) -> float:
    """Who starts first among tied plans: the smallest (allocated + the job's GPUs) /
    max(deserved, fair share)."""
    base = max(deserved, fair)
    return (allocated + gpus) / base if base > EPS else float("inf")


def start_order(tree: QueueTree, shares: Shares, held: dict[str, float], waiting: list[Job]) -> list[Job]:
    """Who starts first. Inside a queue: higher priority, then older. Across queues: work
    that keeps its queue within its guarantee, then within its fair share, then the
    smallest relative share (departments compared first, then the queues inside them),
    then higher priority, then older (submitted_at), then the name."""
    by_queue: dict[str, list[Job]] = {}
    for job in sorted(waiting, key=lambda j: (-j.priority, j.submitted_at, j.name)):
        by_queue.setdefault(job.queue, []).append(job)
    keyed = []
    for q, jobs in by_queue.items():
        top_down = list(reversed(tree.path(q)))
        ahead = 0.0
        for job in jobs:
            after = held[q] + ahead + job.total_gpus
            shares_key = tuple(relative_share(held[e] + ahead, job.total_gpus, shares.deserved[e], shares.fair[e])
                               for e in top_down)
            keyed.append(((after > shares.guarantee[q] + EPS, after > shares.fair[q] + EPS, shares_key,
                           -job.priority, job.submitted_at, job.name), job))
            ahead += job.total_gpus
    return [job for _, job in sorted(keyed, key=lambda x: x[0])]


def best_fill(amounts: list[float], share: float) -> float:
    """The most GPUs a set of jobs of these sizes holds without going above `share` (jobs are
    indivisible): how much of a queue's work counts toward its share."""
    milli = [round(a * 1000) for a in amounts if a > EPS]
    limit = round(share * 1000)
    if sum(milli) <= limit:
        return sum(milli) / 1000
    unit = math.gcd(*milli)
    reach, mask = 1, (1 << (limit // unit + 1)) - 1  # bit k: some subset sums to k units
    for a in milli:
        reach |= (reach << (a // unit)) & mask
    return (reach.bit_length() - 1) * unit / 1000
