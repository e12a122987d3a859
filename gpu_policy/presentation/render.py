"""Plans and cluster layouts as text a person reads at a glance."""

from __future__ import annotations

import string

from gpu_policy.model import Scenario
from gpu_policy.model.plan import Placement, Plan
from gpu_policy.model.layout import running_layout


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = [header] + rows
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def _where(replicas: list[Placement]) -> str:
    parts = []
    for r in replicas:
        ix = r.gpu_indices
        span = f"{ix[0]}-{ix[-1]}" if len(ix) > 2 and ix == list(range(ix[0], ix[-1] + 1)) else ",".join(map(str, ix))
        share = f"x{r.gpus:g}" if r.gpus < 1 else ""
        parts.append(f"{r.node}[{span}]{share}")
    return " ".join(parts)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def queue_table(plan: Plan) -> str:
    """One row per queue; where past usage counts, its GPU-hours and the fair share without it."""
    usage = any(q.usage_gpu_h is not None for q in plan.queues)
    rows = [[q.name if not q.parent else f"{q.parent}/{q.name}", _num(q.deserved), _num(q.limit),
             str(q.fair_share), *([_num(q.usage_gpu_h), _num(q.fair_share_without_usage)] if usage else []),
             _num(q.pending_demand), _num(q.allocated_before), _num(q.allocated_after)]
            for q in plan.queues]
    return text_table(["QUEUE", "DESERVED", "LIMIT", "FAIR SHARE", *(["USAGE GPU-H", "WITHOUT USAGE"] if usage else []),
                       "PENDING", "BEFORE", "AFTER"], rows)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def composition_table(plan: Plan) -> str:
    """GPUs the plan attaches to and detaches from composable nodes ("" when none)."""
    if not plan.compositions:
        return ""
    return text_table(["NODE", "MODEL", "GPUS", "REASON"],
                      [[c.node, c.model, f"{c.change:+d}", c.reason] for c in plan.compositions])


def gpus_allocated(summary: dict) -> str:
    """'GPUs allocated B -> A of T', T the cluster's GPUs once the plan's compositions are
    carried out (with how they change it, where they do)."""
    s = summary
    total = s["gpus_total"] + s["attached"] - s["detached"]
    composed = (f" ({s['gpus_total']} + {s['attached']} attached - {s['detached']} detached)"
                if s["attached"] or s["detached"] else "")
    return f"GPUs allocated {s['gpus_allocated_before']:g} -> {s['gpus_allocated_after']:g} of {total}{composed}"


def plan_table(plan: Plan) -> str:
    """The whole plan: jobs, compositions, queues, summary and solver, as aligned text."""
    jobs = text_table(["JOB", "QUEUE", "ACTION", "WHERE", "CODE", "REASON"],
                      [[j.name, j.queue, j.action, _where(j.replicas), j.code, j.reason] for j in plan.jobs])
    s, v = plan.summary, plan.solver
    counts = ", ".join(_count(s[key], noun) for key, noun in
                       (("starts", "start"), ("preemptions", "preemption"), ("moves", "move")))
    summary = (f"summary: {counts}, {s['waiting']} waiting; {gpus_allocated(s)}; empty nodes {s['empty_nodes_after']}, "
               f"largest free block {s['largest_free_block_after']}")
    solver = (f"solver: {v.backend} {v.status} in {v.seconds:.2f} s "
              f"({len(v.stages)} stages, {v.variables} variables, {v.constraints} constraints)")
    warnings = "".join(f"\nwarning: {w}" for w in plan.warnings)
    compositions = f"\n\n{composition_table(plan)}" if plan.compositions else ""
    return f"{jobs}{compositions}\n\n{queue_table(plan)}\n\n{summary}\n{solver}{warnings}"


def layout_before_after(s: Scenario, plan: Plan) -> str:
    """Each node's GPUs before and after the plan, one letter per GPU.

    A letter names the queue holding the GPU (lower case: already running;
    upper case: started or moved by this plan); '.' is free, '!' unhealthy and free.
    GPUs the plan attaches or detaches lengthen or shorten the node's row.
    """
    leaves = [q for q in s.queues if not s.children(q.name)]
    letters = {q.name: string.ascii_lowercase[i % 26] for i, q in enumerate(leaves)}
    change = plan.changes_by_node()
    before, after = _free_rows(s, change)
    _mark_running(s, letters, before)
    _mark_planned(plan, letters, after)
    width = max(len(n.name) for n in s.nodes)
    gpus = max(n.gpus for n in s.nodes)

    def composed(node: str) -> str:
        n = change.get(node, 0)
        return f"  ({n} attached)" if n > 0 else f"  ({-n} detached)" if n < 0 else ""

    lines = [f"{'':{width}}  {'before':{gpus}}    after"]
    lines += [f"{n.name:{width}}  {''.join(before[n.name]):{gpus}} -> {''.join(after[n.name])}{composed(n.name)}"
              for n in s.nodes]
    legend = ", ".join(f"{v}={k}" for k, v in letters.items())
    lines.append(f"({legend}; UPPER CASE: started or moved by this plan; '.': free)")
    return "\n".join(lines)


def _free_rows(s: Scenario, change: dict[str, int]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each node's row before and after the plan (after: its GPUs once composed), free ('.')
    but for its unhealthy GPUs ('!')."""
    before = {n.name: ["."] * n.gpus for n in s.nodes}
    after = {n.name: ["."] * (n.gpus + change.get(n.name, 0)) for n in s.nodes}
    for n in s.nodes:
        for i in n.unhealthy_gpus:
            before[n.name][i] = "!"
            if i < len(after[n.name]):
                after[n.name][i] = "!"
    return before, after


def _mark_running(s: Scenario, letters: dict[str, str], before: dict[str, list[str]]) -> None:
    """The GPUs running jobs hold, in their queue's letter."""
    held = running_layout(s).indices
    for job in s.jobs:
        for node, indices in zip(job.running, held.get(job.name, [])):
            for i in indices:
                before[node][i] = letters[job.queue]


def _mark_planned(plan: Plan, letters: dict[str, str], after: dict[str, list[str]]) -> None:
    """The GPUs of the jobs the plan keeps (lower case) and starts or moves (upper case)."""
    for d in plan.jobs:
        if d.action not in ("keep", "start", "move"):
            continue
        mark = letters[d.queue] if d.action == "keep" else letters[d.queue].upper()
        for r in d.replicas:
            for i in r.gpu_indices:
                after[r.node][i] = mark


def telemetry_table(signals, scenario: Scenario | None = None) -> str:
    """One row per GPU: utilisation, memory, and the signals the planner uses."""
    holders = {}
    if scenario is not None:
        layout = running_layout(scenario)
        for job in scenario.jobs:
            for node, ix in zip(job.running, layout.indices.get(job.name, [])):
                for i in ix:
                    holders.setdefault((node, i), []).append(job.name)
    rows = []
    for key, g in sorted(signals.gpus.items()):
        marks = []
        if g.idle:
            marks.append(f"idle {g.idle_for_s / 60:.0f} min")
        if g.busy:
            marks.append("busy")
        marks += [f"XID {code} ({text})" for code, text in g.critical_xids]
        memory = "-" if g.memory_total_mib is None else f"{g.memory_total_mib - g.memory_free_mib:.0f}/{g.memory_total_mib:.0f}"
        status = "unhealthy" if g.unhealthy else g.status  # never "ok" beside a critical XID
        rows.append([key.node, str(key.gpu), _num(g.utilization), memory, status, ", ".join(marks),
                     ",".join(holders.get((key.node, key.gpu), []))])
    header = ["NODE", "GPU", "UTIL %", "MEM MiB", "STATUS", "SIGNALS", "JOB"]
    age = "-" if signals.age_s is None else f"{signals.age_s:.0f} s"
    return (f"{text_table(header, rows)}\n\nsource: {signals.source}; window {signals.window_s:g} s; newest data {age} old; "
            f"idle jobs: {', '.join(f'{j} ({s / 60:.0f} min)' for j, s in sorted(signals.idle_jobs.items())) or 'none'}")
