"""What preempting or moving a job costs in the program's preemption and moves stages
(`rules.victims.preemption_stages`, `rules.moves.moves_stage`)."""

from __future__ import annotations

from gpu_policy.model import Job
from gpu_policy.planner import rules
from gpu_policy.planner.config import PlannerConfig


def victim_costs(victims: list[Job], cfg: PlannerConfig) -> dict[str, float]:
    """Cost of preempting (or moving) each victim: the work it loses (rules.lost_work) in
    whole GPU-minutes, so that a plan's victims lose the least work in all, and plans losing
    the same work tie; plus less than one GPU-minute over all victims that prefers fewer
    victims, then the most recently submitted."""
    if not victims:
        return {}
    n = len(victims)
    recent = {j.name: r for r, j in enumerate(sorted(victims, key=lambda j: (-j.submitted_at, j.name)))}
    minutes = {j.name: round(rules.lost_work(j, cfg.default_checkpoint_age_s) / 60) for j in victims}
    return {j.name: minutes[j.name] + (1 + recent[j.name] / n) / (2 * n + 2) for j in victims}
