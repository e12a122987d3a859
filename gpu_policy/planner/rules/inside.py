"""Priority inside a queue: only a strictly higher priority of the same queue preempts
(`may_preempt_inside`), only for GPUs its starts need (`most_idle_for_inside_victim`,
`gathered_by_moves`), and never so that the victim could swap back (`may_swap_back`).
The program's rows and stages for this rule are in `gpu_policy.planner.inside`, each
calling these."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpu_policy.model import Job
from gpu_policy.planner.codes import Reason
from gpu_policy.planner.rules.vocabulary import EPS, STRICT

if TYPE_CHECKING:
    from gpu_policy.planner.reasons import Judged


def why_wait(job: Job, judged: Judged) -> Reason | None:
    """The free GPUs would hold the job, but its queue loses a job in this plan that could
    take its place (`may_swap_back`): starting it would only swap them."""
    if judged.no_room(job) is not None:
        return None
    q = job.queue
    v = next((v for v in judged.swapped.get(q, ()) if may_swap_back(v, job)), None)
    if v is None:
        return None
    return Reason("WouldSwapInsideQueue",
                  f"{q} loses {v.name} (priority {v.priority}) in this plan; inside a queue only a higher "
                  f"priority takes a job's place, and {v.name} could take this one's")


def why_preempt(job: Job, judged: Judged, started: dict[str, list[Job]]) -> Reason | None:
    """The job makes way for higher-priority jobs of its own queue that the plan starts
    (`started`: per queue)."""
    mine = [p for p in started.get(job.queue, ()) if may_preempt_inside(job, p)]
    if not mine:
        return None
    names = ", ".join(f"{p.name} (priority {p.priority})" for p in mine)
    return Reason("PreemptedInsideQueue", f"preempted inside {job.queue} (priority {job.priority}) for "
                                          f"higher-priority {names}")


def may_preempt_inside(victim: Job, job: Job) -> bool:
    """Preemption inside a queue: only a strictly higher priority preempts."""
    return victim.is_preemptible and victim.queue == job.queue and victim.priority < job.priority


def most_idle_for_inside_victim(victim: Job) -> float:
    """Preempt inside a queue only for GPUs the queue's starts need: the GPUs the plan
    leaves idle (fractions counted by size: moves could gather them) are fewer than the
    victim's, so it could not run on them. Otherwise the preemption would only turn its
    queue's higher-priority start from borrowing into a claim, and the next plan would
    gather the idle GPUs and restart the victim. The most GPUs a plan that preempts
    `victim` for its own queue may leave idle."""
    return victim.total_gpus - STRICT


def gathered_by_moves(victim: Job) -> bool:
    """Whether idle GPUs in the cluster, counted by amount, say the victim could run once
    moves gather them: for replicas of at most one GPU (fractions, single GPUs) moves of
    fractions can gather a GPU anywhere; a replica of several GPUs needs them on one node,
    which idle GPUs spread over nodes do not give."""
    return victim.gpus <= 1


def may_swap_back(victim: Job, starter: Job) -> bool:
    """Could `victim`, preempted by a plan that starts `starter` of its queue, take
    `starter`'s place in the next plan? Only a strictly higher priority preempts inside a
    queue, and only where the starter's GPUs could hold the victim's replicas: a whole-GPU
    starter frees whole GPUs, each of which holds one fractional replica; a fractional
    starter frees fractions, which may share one GPU (so k of them make room for a
    fraction up to k times their size), and never a whole GPU for sure."""
    if not may_preempt_inside(starter, victim):
        return False
    if victim.is_fractional:
        if not starter.is_fractional:
            return victim.replicas <= starter.replicas * int(starter.gpus)
        per_place = math.ceil(victim.gpus / starter.gpus - EPS)  # starter replicas one victim replica needs
        return victim.replicas <= starter.replicas // per_place
    if starter.is_fractional:
        return False
    return victim.gpus <= starter.gpus and victim.replicas <= starter.replicas * (starter.gpus // victim.gpus)
