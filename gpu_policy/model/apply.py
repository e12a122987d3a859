"""The scenario as it is after a plan has been carried out."""

from __future__ import annotations

import dataclasses

from gpu_policy.model.composition import apply_compositions
from gpu_policy.model import Scenario
from gpu_policy.model.plan import Plan


def apply_plan(s: Scenario, plan: Plan) -> Scenario:
    """Started and moved jobs run where the plan put them; preempted jobs wait; the
    plan's GPUs are attached and detached (at once: the embedded cluster has no delay).

    Every running job gets explicit ``gpu_indices``, so the next plan sees the
    same GPUs. The ``expect:`` block is dropped: it described the old state.
    """
    decided = {d.name: d for d in plan.jobs}
    jobs = []
    for job in s.jobs:
        d = decided[job.name]
        if d.action in ("keep", "start", "move"):
            running = [r.node for r in d.replicas]
            indices = [list(r.gpu_indices) for r in d.replicas]
        else:
            running, indices = [], None
        jobs.append(dataclasses.replace(job, running=running, gpu_indices=indices))
    telemetry = s.telemetry
    if telemetry and telemetry.get("jobs"):  # a preempted job's profile no longer describes a GPU
        gone = {d.name for d in plan.jobs if d.action == "preempt"}
        telemetry = {**telemetry, "jobs": {j: p for j, p in telemetry["jobs"].items() if j not in gone}}
    after = dataclasses.replace(s, nodes=list(s.nodes), queues=list(s.queues), jobs=jobs, expect=None,
                                telemetry=telemetry)
    return apply_compositions(after, plan)
