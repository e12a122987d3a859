"""The Plan a solved program comes to: every job's decision with its reason (the rules, asked
in order: `gpu_policy.planner.ruleset`), the queues before and after, the summary. The jobs are read
once (`_gather`): for what the queues hold after the plan and what waits, and for the
decisions of the jobs the plan keeps where they run (most of them, and they need no reason);
the few that start, stop, move or wait are decided then, with their reasons, once the state
those are judged on is known (`_judge`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from gpu_policy.model import EPS, Job, Scenario
from gpu_policy.model.layout import Layout, spare_resources
from gpu_policy.model.plan import JobDecision, Placement, Plan, QueueReport, SolverReport
from gpu_policy.model.signals import ClusterSignals
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.fair_share import queue_usage
from gpu_policy.planner.core.judged import FreeRoom, Judged
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.queues import FAIR, GUARANTEE, QueueTree
from gpu_policy.planner.core.realize import Realized
from gpu_policy.planner.core.scope import Standing
from gpu_policy.planner.core.solvers import NOTHING, OPTIMAL
from gpu_policy.planner.core.telemetry import GpuLimits
from gpu_policy.planner.ruleset import RuleSet


def write_plan(s: Scenario, st: Standing, m: PlanProgram, out: Realized, layout: Layout, limits: GpuLimits,
               kinds, report: SolverReport, signals: ClusterSignals | None, rules: RuleSet,
               refused: dict[str, str]) -> Plan:
    """The Plan of the solved program `m`, realised as `out` on the cluster `layout` held before it."""
    g = _gather(s, st.tree, out, layout)
    judged = Judged(s, st.tree, st.shares, st.held, g.after, g.nonpreemptible_after, out.layout,
                    spare_resources(s, g.running_after, {**out.started, **out.moved}), limits, kinds,
                    receiving={q: (GUARANTEE if _on(t.get(GUARANTEE)) else FAIR)
                               for q, t in m.flows.receives.items() if any(_on(v) for v in t.values())},
                    giving={q: max(t, key=lambda k: t[k].varValue or 0) for q, t in m.flows.gives.items()
                            if any((v.varValue or 0) > EPS for v in t.values())},
                    swapped=g.swapped, cut_off=report.status != OPTIMAL and report.status != NOTHING,
                    room_reason=rules.no_room, refused=refused,
                    unplaced=out.unplaced)
    _judge(s, out, layout, judged, g, rules)
    changes = [g.decisions[i] for i in g.judged]
    compositions = rules.report(changes, g.jobs)
    return Plan(
        jobs=g.decisions,
        queues=_queue_reports(s, st, g),
        summary={**_summary(s, st.tree, changes, st.held, g.after, judged.room), **rules.summarize(out.layout)},
        solver=report,
        telemetry=signals.describe() if signals else None,
        compositions=compositions,
    )


def _queue_reports(s: Scenario, st: Standing, g: _Gathered) -> list[QueueReport]:
    """What the plan says of each queue; its past usage and the fair share it would have
    without it only where the policy keeps usage (a half-life; with `usage_weight: 0` the two
    fair shares are one)."""
    kept = s.policy.usage_half_life_s is not None
    plain = (st.shares.fair if st.shares.without_usage is None else st.shares.without_usage) if kept else None
    usage = queue_usage(s) if kept else None
    return [QueueReport(q.name, q.deserved, st.shares.fair[q.name], g.pending[q.name], st.held[q.name],
                        g.after[q.name], q.parent, q.limit,
                        usage_gpu_h=None if usage is None else usage[q.name],
                        fair_share_without_usage=None if plain is None else plain[q.name])
            for q in s.queues]


def _on(var) -> bool:
    return var is not None and (var.varValue or 0) > 0.5


@dataclass
class _Gathered:
    """What the plan leaves, read from the jobs in one pass."""

    jobs: dict[str, Job] = field(default_factory=dict)                  # name -> job, of those that start or move
    running_after: set[str] = field(default_factory=set)                # jobs that run after the plan
    after: dict[str, float] = field(default_factory=dict)               # entity -> GPUs held after the plan
    nonpreemptible_after: dict[str, float] = field(default_factory=dict)  # the same, non-preemptible jobs
    pending: dict[str, float] = field(default_factory=dict)             # entity -> GPUs of jobs waiting before it
    started: dict[str, list[Job]] = field(default_factory=dict)         # queue -> the jobs the plan starts
    swapped: dict[str, list[Job]] = field(default_factory=lambda: defaultdict(list))  # queue -> jobs it preempts
    decisions: list[JobDecision | None] = field(default_factory=list)   # per job, in order; None: not judged yet
    judged: list[int] = field(default_factory=list)                     # where the jobs to judge are (`_judge`)


def _gather(s: Scenario, tree: QueueTree, out: Realized, layout: Layout) -> _Gathered:
    """What each entity holds after the plan (all jobs, and non-preemptible ones), what
    waited in each before it, per queue the jobs the plan starts and preempts
    (the inside rule's `no_swap_inside`: the queue's jobs whose place they could take wait), and the
    decision of every job the plan keeps where it runs (`layout`: where running jobs are now).
    Amounts are summed in the jobs' order, as `planner.held` sums them, so they are the same
    numbers."""
    g = _Gathered()
    jobs, pending, running_after, swapped = g.jobs, dict.fromkeys(tree.parent, 0), g.running_after, g.swapped
    decisions, judged, indices = g.decisions, g.judged, layout.indices
    preempted, started, moved = out.preempted, out.started, out.moved
    leaf: dict[str, float] = defaultdict(float)
    leaf_nonpreemptible: dict[str, float] = defaultdict(float)
    paths = {q: tree.path(q) for q in tree.parent}
    for job in s.jobs:
        name, q, gpus = job.name, job.queue, job.total_gpus
        if job.running:
            runs = name not in preempted
            if not runs:
                swapped[q].append(job)
        else:
            runs = name in started
            for e in paths[q]:
                pending[e] += gpus
        if runs:
            running_after.add(name)
            leaf[q] += gpus
            if not job.is_preemptible:
                leaf_nonpreemptible[q] += gpus
            if job.running and name not in moved:  # kept where it runs: no reason to write
                decisions.append(JobDecision(name, q, "keep", _where(job, indices[name])))
                continue
            jobs[name] = job
        judged.append(len(decisions))
        decisions.append(None)
    g.pending = pending
    g.after = tree.rolled_up(leaf)
    g.nonpreemptible_after = tree.rolled_up(leaf_nonpreemptible)
    for name in started:
        g.started.setdefault(jobs[name].queue, []).append(jobs[name])
    return g


def _where(job: Job, indices: list[list[int]]) -> list[Placement]:
    """Where a running job's replicas are now (`indices`: theirs, per replica, from the
    layout: its lists are never changed in place, so the plan shares them, as it shares
    those of the replicas it places)."""
    return [Placement(node, job.gpus, ix) for node, ix in zip(job.running, indices)]


def _judge(s: Scenario, out: Realized, layout: Layout, judged: Judged, g: _Gathered, rules: RuleSet) -> None:
    """The decision, with its reason, of every job `_gather` left to judge: those that start,
    are preempted, move or wait (`layout`: where running jobs are now), the `rules` giving the reasons."""
    jobs, decisions, placed, started = s.jobs, g.decisions, out.started, g.started
    for i in g.judged:
        job = jobs[i]
        name = job.name
        if name in out.moved:
            decisions[i] = _decision(job, "move", out.moved[name], rules.move_reason(job, out.moved[name], placed))
        elif job.running:
            decisions[i] = _decision(job, "preempt", _where(job, layout.indices[name]),
                                     rules.preempt_reason(job, judged, started))
        elif name in placed:
            decisions[i] = _decision(job, "start", placed[name], _ADMITTED)
        else:
            decisions[i] = _decision(job, "wait", [], rules.wait_reason(job, judged))


#: A start on GPUs that are there (one on GPUs being attached: the composition rule says so).
_ADMITTED = Reason("Admitted", "")


def _decision(job: Job, action: str, replicas: list[Placement], why: Reason) -> JobDecision:
    return JobDecision(job.name, job.queue, action, replicas, why.text, why.code)


def _summary(s: Scenario, tree: QueueTree, changes: list[JobDecision], before: dict[str, float],
             after: dict[str, float], room: FreeRoom) -> dict:
    """The plan in numbers; `changes`: its decisions other than keep; `room`: the free room it
    leaves on every node."""
    top = tree.children[None]
    count = Counter(d.action for d in changes)
    return {
        "gpus_total": s.gpus_total,
        "gpus_allocated_before": sum(before[q] for q in top),
        "gpus_allocated_after": sum(after[q] for q in top),
        "starts": count["start"],
        "preemptions": count["preempt"],
        "moves": count["move"],
        "waiting": count["wait"],
        "empty_nodes_after": room.empty_nodes,
        "largest_free_block_after": room.largest_block(),
    }
