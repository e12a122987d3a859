"""Compare a Plan with a scenario's `expect:` block (`gpu-policy plan --check`)."""

from __future__ import annotations

from gpu_policy.model.plan import JobDecision, Plan


def _same(expected, got) -> bool:
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        return abs(expected - got) < 1e-6
    return expected == got


def differences(plan: Plan, expect: dict | None) -> list[str]:
    """One line per expectation the plan misses; empty when all hold."""
    if not expect:
        return []
    out = []
    actions = {j.name: j for j in plan.jobs}
    for name, want in (expect.get("jobs") or {}).items():
        out += _job_differences(name, actions[name], want if isinstance(want, dict) else {"action": want})
    queues = {q.name: vars(q) for q in plan.queues}
    for name, fields in (expect.get("queues") or {}).items():
        for key, want in fields.items():
            if key not in queues[name]:
                out.append(f"queues.{name}.{key}: no such queue field in the plan")
            elif not _same(want, queues[name][key]):
                out.append(f"queues.{name}.{key}: expected {want}, got {queues[name][key]:g}")
    for key, want in (expect.get("summary") or {}).items():
        if key not in plan.summary:
            out.append(f"summary.{key}: no such summary field in the plan")
        elif not _same(want, plan.summary[key]):
            out.append(f"summary.{key}: expected {want}, got {plan.summary[key]}")
    changes = plan.changes_by_node()
    for node, want in (expect.get("compositions") or {}).items():
        if changes.get(node, 0) != want:
            out.append(f"compositions.{node}: expected {want:+d}, got {changes.get(node, 0):+d}")
    return out


def _job_differences(name: str, got: JobDecision, want: dict) -> list[str]:
    """A job's action, and where pinned its reason's code and the nodes its replicas are on."""
    out = []
    why = f" ({got.reason})" if got.reason else ""
    if got.action != want["action"]:
        out.append(f"jobs.{name}: expected {want['action']}, got {got.action}{why}")
    if "code" in want and got.code != want["code"]:
        out.append(f"jobs.{name}.code: expected {want['code']}, got {got.code or 'none'}{why}")
    if "nodes" in want and sorted(r.node for r in got.replicas) != sorted(want["nodes"]):
        out.append(f"jobs.{name}.nodes: expected {', '.join(sorted(want['nodes']))}, got "
                   f"{', '.join(sorted(r.node for r in got.replicas)) or 'none'}")
    return out
