"""Which victim goes first: the one order every part of the planner uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gpu_policy.model import Job

if TYPE_CHECKING:
    from gpu_policy.planner.reasons import Judged


def why_first(job: Job, judged: Judged) -> str | None:
    """What put a preempted job first among the victims: it was idle (DCGM telemetry), for how long."""
    idle_s = judged.limits.idle_jobs.get(job.name)
    return None if idle_s is None else f"idle for {idle_s / 60:.0f} min"


def lost_work(job: Job, default_age_s: float) -> float:
    """GPU-seconds since the job's last checkpoint: what preempting or moving it loses (an
    unknown age counts as `default_age_s`)."""
    age = job.checkpoint_age_s if job.checkpoint_age_s is not None else default_age_s
    return job.total_gpus * age


def idle_victim(job: Job, idle_jobs: Mapping[str, float], held: Mapping[str, float],
                fair: Mapping[str, float]) -> bool:
    """An idle job (DCGM telemetry) of a queue above its fair share: the first victim."""
    return job.name in idle_jobs and held[job.queue] > fair[job.queue]


def victim_tier(job: Job, idle: bool) -> tuple[int, int]:
    """Which victims go first, before any cost: idle jobs of queues above their share, then
    the lowest priority. The program has one preemption stage per tier (highest first, so
    the lowest tier goes first); the greedy scope ranks candidate nodes by the highest tier
    their victims take."""
    return (0, 0) if idle else (1, job.priority)


def victim_order_key(job: Job, lost_work: float, idle: bool = False) -> tuple:
    """Among valid victims: the lowest tier (`victim_tier`), then the least lost work, then
    the most recently submitted."""
    return (*victim_tier(job, idle), lost_work, -job.submitted_at, job.name)
