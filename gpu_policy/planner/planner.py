"""`plan(scenario) -> Plan`: observe nothing, decide everything, no I/O."""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict

from gpu_policy.fair_share import fair_shares, queue_demands
from gpu_policy.model import Job, Scenario
from gpu_policy.plan import JobDecision, Placement, Plan, QueueReport
from gpu_policy.planner.candidates import GpuLimits, find_candidates
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.layout import Layout, largest_free_block, layout_after, place, running_layout, spare_resources
from gpu_policy.planner.program import build_program
from gpu_policy.planner.moves import consolidate
from gpu_policy.planner.packing import scenario_mix
from gpu_policy.planner.reasons import move_reason, preempt_reason, wait_reason
from gpu_policy.planner.solve import solve_stages
from gpu_policy.telemetry.signals import ClusterSignals


def plan(scenario: Scenario, config: PlannerConfig | None = None, signals: ClusterSignals | None = None) -> Plan:
    """Decide keep / start / preempt / wait for every job of a validated scenario.

    With `signals` (DCGM telemetry, see `plan_with_telemetry`): unhealthy GPUs get
    no new work, idle jobs of queues above their share are the first victims, and
    fractional jobs avoid busy GPUs and GPUs without the memory they need.
    """
    cfg = config or PlannerConfig()
    cfg.validate()
    s = _with_unhealthy(scenario, signals) if signals else scenario
    limits = _limits(signals) if signals else None
    began = time.perf_counter()
    layout = running_layout(s)
    fair = fair_shares(s)
    before = held_gpus(s, {j.name for j in s.jobs if j.is_running})
    cand = find_candidates(s, layout, fair, before, cfg, limits)
    program = build_program(s, layout, cand, fair, before, cfg.workload_mix or scenario_mix(s))
    built = time.perf_counter() - began
    report = solve_stages(program, cfg)
    report.build_seconds = built

    preempted = {name for name, var in program.keep.items() if round(var.varValue or 0) == 0}
    started = [j for j in s.jobs if j.name in program.start and round(program.start[j.name].varValue or 0) == 1]
    after = layout_after(layout, preempted)
    placements = _place_starts(started, program, after)
    running_after = {j.name for j in s.jobs if j.is_running and j.name not in preempted} | {j.name for j in started}
    held_after = held_gpus(s, running_after)
    spare = spare_resources(s, running_after, placements)
    waiting = [j for j in s.jobs if not j.is_running and j.name not in placements]
    merged = None if preempted else consolidate(s, after, waiting, running_after, held_after, fair, spare,
                                                set(placements), cfg)
    moved: dict[str, Placement] = {}
    if merged:
        moved, after = merged.moved, merged.layout
        placements.update(merged.started)
        running_after |= set(merged.started)
        held_after = held_gpus(s, running_after)
        spare = spare_resources(s, running_after, {**placements, **{j: [p] for j, p in moved.items()}})
        report.stages.extend(merged.stages)
        report.seconds += sum(stage["seconds"] for stage in merged.stages)
        if report.status == "Nothing to decide":
            report.status = "Optimal"

    decisions = []
    for job in s.jobs:
        if job.name in moved:
            decisions.append(JobDecision(job.name, job.queue, "move", [moved[job.name]],
                                         move_reason(job, moved[job.name], merged.started)))
        elif job.is_running:
            action = "preempt" if job.name in preempted else "keep"
            reason = preempt_reason(job, s, before, fair, started, cand.idle.get(job.name)) if action == "preempt" else ""
            decisions.append(JobDecision(job.name, job.queue, action, _placements(job, layout), reason))
        elif job.name in placements:
            decisions.append(JobDecision(job.name, job.queue, "start", placements[job.name]))
        else:
            decisions.append(JobDecision(job.name, job.queue, "wait", [],
                                         wait_reason(job, s, after, held_after, fair, spare, running_after, limits)))
    return Plan(
        jobs=decisions,
        queues=_queue_reports(s, fair, before, held_after),
        summary=_summary(s, decisions, before, held_after, after),
        solver=report,
        telemetry=signals.describe() if signals else None,
    )


def _with_unhealthy(s: Scenario, signals: ClusterSignals) -> Scenario:
    """The scenario with GPUs that telemetry finds unhealthy marked so: no new work."""
    bad: dict[str, set[int]] = defaultdict(set)
    for key in signals.unhealthy():
        bad[key.node].add(key.gpu)
    nodes = [dataclasses.replace(n, unhealthy_gpus=sorted(set(n.unhealthy_gpus) | {g for g in bad[n.name] if g < n.gpus}))
             for n in s.nodes]
    return dataclasses.replace(s, nodes=nodes)


def _limits(signals: ClusterSignals) -> GpuLimits:
    return GpuLimits(
        busy=frozenset((k.node, k.gpu) for k, g in signals.gpus.items() if g.busy),
        memory_free_mib={(k.node, k.gpu): (g.memory_free_mib, g.memory_total_mib) for k, g in signals.gpus.items()},
        idle_jobs=dict(signals.idle_jobs),
    )


def held_gpus(s: Scenario, running: set[str]) -> dict[str, float]:
    """GPUs each queue (departments included) holds when `running` jobs run."""
    leaf: dict[str, float] = defaultdict(float)
    for job in s.jobs:
        if job.name in running:
            leaf[job.queue] += job.total_gpus
    return {q.name: sum(leaf[x] for x in s.leaf_queue_names(q.name)) for q in s.queues}


def _placements(job: Job, layout: Layout) -> list[Placement]:
    return [Placement(node, job.gpus, list(ix)) for node, ix in zip(job.running, layout.indices[job.name])]


def _place_starts(started: list[Job], program, after: Layout) -> dict[str, list[Placement]]:
    """GPU indices for every started replica: fractions first, on the GPU the
    program chose; whole-GPU replicas then take the lowest indices left free."""
    out: dict[str, list[Placement]] = {j.name: [] for j in started}
    jobs = {j.name: j for j in started}
    for (p, node, gpu), var in sorted(program.y.items()):
        if p in jobs:
            for _ in range(round(var.varValue or 0)):
                out[p].append(Placement(node, jobs[p].gpus, place(after, jobs[p], node, gpu)))
    for (p, node), var in sorted(program.x.items()):
        if p in jobs:
            for _ in range(round(var.varValue or 0)):
                out[p].append(Placement(node, jobs[p].gpus, place(after, jobs[p], node)))
    return out


def _queue_reports(s: Scenario, fair: dict[str, int], before: dict[str, float],
                   after: dict[str, float]) -> list[QueueReport]:
    demand = queue_demands(s)
    return [
        QueueReport(q.name, q.deserved, fair[q.name], demand[q.name].pending,
                    before[q.name], after[q.name], q.parent, q.limit)
        for q in s.queues
    ]


def _summary(s: Scenario, decisions: list[JobDecision], before: dict[str, float],
             after: dict[str, float], layout: Layout) -> dict:
    top = [q.name for q in s.queues if q.parent is None]
    count = lambda action: sum(1 for d in decisions if d.action == action)  # noqa: E731
    return {
        "gpus_total": s.gpus_total,
        "gpus_allocated_before": sum(before[q] for q in top),
        "gpus_allocated_after": sum(after[q] for q in top),
        "starts": count("start"),
        "preemptions": count("preempt"),
        "moves": count("move"),
        "waiting": count("wait"),
        "empty_nodes_after": sum(1 for nl in layout.nodes.values() if all(sl.free for sl in nl.slots)),
        "largest_free_block_after": largest_free_block(layout),
    }
