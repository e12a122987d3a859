"""One plan checker for every test that needs a valid plan: whatever the planner decided,
and however its time ran out, a Plan must keep these invariants."""

from __future__ import annotations

from collections import defaultdict

from gpu_policy import Plan, PlannerConfig, Scenario
from gpu_policy.model.composition import apply_compositions, attachable, detachable
from gpu_policy.model.placement import admits, constraints_of
from gpu_policy.model.layout import running_layout

ACTIONS = {True: {"keep", "preempt", "move"}, False: {"start", "wait"}}
EPS = 1e-9


def check_plan(s: Scenario, result: Plan, config: PlannerConfig | None = None) -> None:
    """Raise AssertionError naming the first broken invariant: every job exactly once with
    an action its state allows; kept jobs on their GPUs; gangs whole; GPU indices on the
    node, healthy for new work, never shared beyond one GPU; CPU and memory; GPU models;
    placement constraints (node selector, affinity, tolerations) where replicas start or move;
    limits; non-preemptible jobs never preempted or moved and started only within deserved
    at every level; at most `max_moves` moves; a reason for every wait and preemption; whole
    GPUs never on shared or MIG GPUs, MIG jobs only on slices of their profile, within the
    node's slices.
    Compositions: within what each node can take and has attached, one change per node,
    each with a reason; GPU indices judged on the nodes as the compositions leave them."""
    cfg = config or PlannerConfig()
    jobs = {j.name: j for j in s.jobs}
    nodes = {n.name: n for n in s.nodes}
    if result.compositions:
        _check_compositions(s, result)
        nodes = {n.name: n for n in apply_compositions(s, result).nodes}
    assert sorted(d.name for d in result.jobs) == sorted(jobs), "every job appears exactly once"
    before = running_layout(s)
    whole: dict = defaultdict(set)
    fractions: dict = defaultdict(float)
    cpu: dict = defaultdict(float)
    memory: dict = defaultdict(float)
    slices: dict = defaultdict(int)
    for d in result.jobs:
        job = jobs[d.name]
        assert d.action in ACTIONS[job.is_running], f"{d.name}: {d.action} for a job that runs={job.is_running}"
        assert d.queue == job.queue, d.name
        if d.action in ("wait", "preempt"):
            assert d.reason, f"{d.name}: a {d.action} needs a reason"
        if d.action in ("preempt", "move"):
            assert job.is_preemptible, f"{d.name}: non-preemptible job {d.action}ed"
        if d.action == "keep":
            assert [(r.node, r.gpu_indices) for r in d.replicas] == list(zip(job.running, before.indices[d.name])), \
                f"{d.name}: a kept job stays on its GPUs"
        if d.action not in ("keep", "start", "move"):
            continue
        assert len(d.replicas) == job.replicas, f"{d.name}: gang of {job.replicas}, placed {len(d.replicas)}"
        for r in d.replicas:
            node = nodes[r.node]
            assert job.fits_model(node), f"{d.name}: GPU model of {r.node}"
            if d.action != "keep":
                assert admits(node, constraints_of(job)), f"{d.name}: placement constraints of {r.node}"
            assert len(r.gpu_indices) == (1 if job.is_fractional else job.gpus), f"{d.name}: indices {r.gpu_indices}"
            cpu[r.node] += job.cpu or 0
            memory[r.node] += job.memory_gib or 0
            if job.mig_profile:
                slices[r.node, job.mig_profile] += 1
            for i in r.gpu_indices:
                assert 0 <= i < node.gpus, f"{d.name}: GPU {i} of {r.node}"
                if d.action != "keep":
                    assert i not in node.unhealthy_gpus, f"{d.name}: new work on unhealthy GPU {r.node}/{i}"
                if job.is_fractional:
                    fractions[r.node, i] += job.gpus
                else:
                    assert (r.node, i) not in whole, f"{d.name}: GPU {r.node}/{i} already held by {whole[r.node, i]}"
                    whole[r.node, i] = {d.name}
    for (node, i), used in fractions.items():
        assert used <= 1 + EPS and (node, i) not in whole, f"GPU {node}/{i} over-shared ({used:g})"
    for (node, profile), used in slices.items():
        assert used <= nodes[node].mig.get(profile, 0), f"{node}: {used} {profile} MIG slices in use"
    for name, node in nodes.items():
        for resource, used in (("cpu", cpu), ("memory_gib", memory)):
            capacity = getattr(node, resource)
            assert capacity is None or used[name] <= capacity + EPS, f"{name}: {resource} {used[name]:g} > {capacity}"
    _check_queues(s, result, jobs)
    assert result.summary["moves"] <= cfg.max_moves, "at most max_moves moves"


def _check_compositions(s: Scenario, result: Plan) -> None:
    assert len({c.node for c in result.compositions}) == len(result.compositions), "one change per node"
    for c in result.compositions:
        assert c.change != 0 and c.reason, f"{c.node}: a composition changes GPUs and says why"
        if c.change > 0:
            assert c.change <= attachable(s, c.node, c.model), f"{c.node}: attaches beyond max_gpus or the pool"
        else:
            assert -c.change <= detachable(s, c.node), f"{c.node}: detaches GPUs it did not attach"
    for model in {c.model for c in result.compositions}:
        pool = s.composable.pool(model)
        assert sum(c.change for c in result.compositions if c.model == model and c.change > 0) <= pool.free, \
            f"pool {model}: more attached than it has"


def _check_queues(s: Scenario, result: Plan, jobs: dict) -> None:
    parent = {q.name: q.parent for q in s.queues}
    runs_after = {d.name for d in result.jobs if d.action in ("keep", "start", "move")}

    def held(names: set[str], only_pinned: bool = False) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for name in names:
            job = jobs[name]
            if only_pinned and job.is_preemptible:
                continue
            q: str | None = job.queue
            while q is not None:
                out[q] += job.total_gpus
                q = parent[q]
        return out

    before, after = held({j.name for j in s.jobs if j.is_running}), held(runs_after)
    pinned_before = held({j.name for j in s.jobs if j.is_running}, True)
    pinned_after = held(runs_after, True)
    started_pinned = any(d.action == "start" and not jobs[d.name].is_preemptible for d in result.jobs)
    reports = {q.name: q for q in result.queues}
    for q in s.queues:
        assert abs(reports[q.name].allocated_after - after[q.name]) < 1e-6, f"{q.name}: allocated_after"
        if q.limit is not None:
            assert after[q.name] <= max(q.limit, before[q.name]) + 1e-6, f"{q.name}: over its limit"
        if started_pinned and pinned_after[q.name] > pinned_before[q.name] + 1e-6:
            assert pinned_after[q.name] <= max(q.deserved, pinned_before[q.name]) + 1e-6, \
                f"{q.name}: non-preemptible work beyond deserved"
