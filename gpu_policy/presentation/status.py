"""`status`: a cluster's queues (as a tree with departments), its waiting jobs in the order
the planner would start them, and what a plan made now does, built from one look and
one plan. Pure: the caller observes, plans and says when."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from gpu_policy.model import Scenario
from gpu_policy.model.plan import Plan
from gpu_policy.planner import start_order
from gpu_policy.presentation.render import text_table


@dataclass
class QueueStatus:
    name: str
    parent: str | None
    depth: int  # 0 for a top-level queue or department
    deserved: float
    limit: float | None
    fair_share: int
    allocated: float  # GPUs its running jobs hold now
    borrowed: float  # allocated beyond its fair share: what reclaim may take back
    pending: float  # GPUs its waiting jobs ask
    pending_by_code: dict[str, float] = field(default_factory=dict)  # waiting GPUs per reason code
    usage_gpu_h: float | None = None  # past usage, where fair share counts it
    fair_share_without_usage: int | None = None


@dataclass
class WaitingJob:
    name: str
    queue: str
    gpus: float
    action: str  # start (in the plan made now) or wait
    code: str
    reason: str


@dataclass
class Status:
    queues: list[QueueStatus]
    waiting: list[WaitingJob]  # in start order; jobs that can never fit last
    plan_time: str  # RFC 3339 UTC
    actions: dict[str, int]  # starts, preemptions, moves, waiting
    changes: list[dict]  # the plan's starts, preemptions and moves: job, queue, action, code, reason
    solver: str

    def to_dict(self) -> dict:
        return asdict(self)


def cluster_status(s: Scenario, result: Plan, planned_at: float) -> Status:
    """The status of scenario `s`, whose plan `result` was made at `planned_at` (seconds since the epoch)."""
    decisions = {d.name: d for d in result.jobs}
    parents = {q.name: q.parent for q in s.queues}
    by_code: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for job in s.jobs:
        d = decisions[job.name]
        if d.action == "wait":
            entity = job.queue
            while entity is not None:
                by_code[entity][d.code] += job.total_gpus
                entity = parents[entity]
    reports = {q.name: q for q in result.queues}
    queues = [QueueStatus(name, parents[name], depth, r.deserved, r.limit, r.fair_share, r.allocated_before,
                          max(0.0, r.allocated_before - r.fair_share), r.pending_demand,
                          dict(sorted(by_code[name].items())), r.usage_gpu_h, r.fair_share_without_usage)
              for name, depth in _tree(s) for r in [reports[name]]]
    ordered = start_order(s)
    named = {j.name for j in ordered}
    rest = sorted((j for j in s.jobs if not j.is_running and j.name not in named), key=lambda j: j.name)
    waiting = [WaitingJob(j.name, j.queue, j.total_gpus, decisions[j.name].action, decisions[j.name].code,
                          decisions[j.name].reason) for j in [*ordered, *rest]]
    summary = result.summary
    changes = [{"job": d.name, "queue": d.queue, "action": d.action, "code": d.code, "reason": d.reason}
               for d in result.jobs if d.action in ("start", "preempt", "move")]
    return Status(queues, waiting,
                  datetime.fromtimestamp(planned_at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  {k: summary[k] for k in ("starts", "preemptions", "moves", "waiting")}, changes,
                  f"{result.solver.backend} {result.solver.status} in {result.solver.seconds:.2f} s")


def _tree(s: Scenario) -> list[tuple[str, int]]:
    """Queue names depth first, each department before its queues, with their depth."""
    out: list[tuple[str, int]] = []

    def walk(parent: str | None, depth: int) -> None:
        for q in s.children(parent):
            out.append((q.name, depth))
            walk(q.name, depth + 1)

    walk(None, 0)
    return out


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def status_text(st: Status) -> str:
    """The status as aligned text: queues (with past usage where it counts), waiting jobs, the
    plan made now."""
    usage = any(q.usage_gpu_h is not None for q in st.queues)
    queues = text_table(
        ["QUEUE", "DESERVED", "LIMIT", "FAIR SHARE", *(["USAGE GPU-H", "WITHOUT USAGE"] if usage else []),
         "ALLOCATED", "BORROWED", "PENDING", "PENDING BY REASON"],
        [["  " * q.depth + q.name, _num(q.deserved), _num(q.limit), str(q.fair_share),
          *([_num(q.usage_gpu_h), _num(q.fair_share_without_usage)] if usage else []), _num(q.allocated),
          _num(q.borrowed), _num(q.pending), ", ".join(f"{c} {g:g}" for c, g in q.pending_by_code.items())]
         for q in st.queues])
    waiting = text_table(["#", "JOB", "QUEUE", "GPUS", "NEXT PLAN", "CODE"],
                         [[str(i), w.name, w.queue, _num(w.gpus), w.action, w.code]
                          for i, w in enumerate(st.waiting, 1)]) if st.waiting else "no job waits"
    a = st.actions
    lines = [queues, "", "waiting, in the order the planner starts them:", waiting, "",
             f"plan at {st.plan_time}: {a['starts']} starts, {a['preemptions']} preemptions, {a['moves']} moves, "
             f"{a['waiting']} waiting ({st.solver})"]
    lines += [f"  {c['action']} {c['job']} ({c['queue']}) {c['code']}" for c in st.changes]
    return "\n".join(lines)
