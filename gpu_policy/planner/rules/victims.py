"""Which victim goes first: the one order every part of the planner uses."""

from __future__ import annotations

from gpu_policy.model import Job



def lost_work(job: Job, default_age_s: float) -> float:
    """GPU-seconds since the job's last checkpoint: what preempting or moving it loses (an
    unknown age counts as `default_age_s`)."""
    age = job.checkpoint_age_s if job.checkpoint_age_s is not None else default_age_s
    return job.total_gpus * age


def victim_order_key(job: Job, lost_work: float) -> tuple:
    """Among valid victims prefer lowest priority, least lost work, most recently submitted."""
    return (job.priority, lost_work, -job.submitted_at, job.name)
