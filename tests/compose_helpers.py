"""Plans with compositions, made by hand: they stand in for the planner's composition
decision where a test needs one exact composition (the scenario, the Plan, the embedded and
Kubernetes actuators, the waiting step), whatever the planner would decide."""

from __future__ import annotations

import dataclasses

from gpu_policy.model import Scenario
from gpu_policy.model.plan import Composition, JobDecision, Placement, Plan
from gpu_policy.planner import plan


def composed_plan(s: Scenario, compositions: list[Composition], starts: dict[str, tuple[str, list[int]]] = {},
                  base: Plan | None = None, preempt: bool = True) -> Plan:
    """The planner's plan of `s` (or `base`), with `compositions` and each job of `starts`
    started on (node, GPU indices); `preempt=False`
    keeps the jobs it preempted (attaching instead)."""
    result = base or plan(s)
    jobs = []
    for d in result.jobs:
        if d.action == "preempt" and not preempt:
            d = JobDecision(d.name, d.queue, "keep", d.replicas)
        if d.name in starts:
            node, indices = starts[d.name]
            job = next(j for j in s.jobs if j.name == d.name)
            d = JobDecision(d.name, d.queue, "start", [Placement(node, job.gpus, indices)],
                            f"starts when its GPUs are attached to {node}")
        jobs.append(d)
    summary = dict(result.summary)
    summary["starts"] = sum(1 for d in jobs if d.action == "start")
    summary["waiting"] = sum(1 for d in jobs if d.action == "wait")
    summary["preemptions"] = sum(1 for d in jobs if d.action == "preempt")
    return dataclasses.replace(result, jobs=jobs, summary=summary, compositions=list(compositions))
