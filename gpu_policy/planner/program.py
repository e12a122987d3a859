"""The integer program: one model, four objectives solved in strict order.

Variables (only where a decision exists; everything else is a constant):
  keep[j]      1 if victim candidate j keeps running (0: preempted, whole gang)
  start[p]     1 if waiting job p starts (all replicas: gangs are all-or-nothing)
  x[p, n]      replicas of whole-GPU job p placed on node n
  y[p, n, i]   replicas of fractional job p placed on GPU i of node n
  z[n, i]      1 if GPU i of node n holds fractions after the plan
  short[q, P]  GPUs queue q lacks, at priority >= P, to reach its fair share
  borrow[q]    GPUs queue q holds beyond max(fair share, what it held before)
  opened[n]    1 if node n, empty before, receives work
Stages (each fixes the optimum of the one before, see docs/policy.md):
  1 fairness   min sum short          every queue reaches its fair share
  2 preemption min sum cost[j](1-keep) as little work lost as possible, one stage
               per victim priority (highest first), so lower priorities go first,
               and idle jobs of queues above their share before any other
  3 starts     max sum value[p]start  most waiting work started, older first
  4 packing    min sum opened + cost  whole free nodes kept, then least expected
                                      fragmentation (gpu_policy.packing)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.packing.fragmentation import WorkloadMix
from gpu_policy.planner.candidates import Candidates
from gpu_policy.planner.layout import Layout
from gpu_policy.planner.packing import placement_costs


def affine(terms: dict, constant: float = 0.0) -> pulp.LpAffineExpression:
    """A linear expression from {variable: coefficient}: much faster than lpSum."""
    return pulp.LpAffineExpression([(v, c) for v, c in terms.items() if c], constant)


@dataclass
class Program:
    prob: pulp.LpProblem
    keep: dict[str, pulp.LpVariable] = field(default_factory=dict)
    start: dict[str, pulp.LpVariable] = field(default_factory=dict)
    x: dict[tuple[str, str], pulp.LpVariable] = field(default_factory=dict)
    y: dict[tuple[str, str, int], pulp.LpVariable] = field(default_factory=dict)
    stages: list[tuple[str, pulp.LpAffineExpression]] = field(default_factory=list)


def build_program(s: Scenario, layout: Layout, cand: Candidates, fair: dict[str, int],
                  before: dict[str, float], mix: WorkloadMix) -> Program:
    prob = pulp.LpProblem("gpu_policy_plan", pulp.LpMinimize)
    m = Program(prob)
    jobs = {j.name: j for j in s.jobs}
    for v in cand.victims:
        m.keep[v.name] = pulp.LpVariable(f"keep_{v.name}", cat="Binary")
    for name, nodes in cand.nodes.items():
        job = jobs[name]
        if not nodes:
            continue
        m.start[name] = pulp.LpVariable(f"start_{name}", cat="Binary")
        for n in nodes:
            m.x[name, n] = pulp.LpVariable(f"x_{name}_{n}", 0, job.replicas, cat="Integer")
    for name, slots in cand.gpus.items():
        job = jobs[name]
        if not slots:
            continue
        m.start[name] = pulp.LpVariable(f"start_{name}", cat="Binary")
        for n, i in slots:
            m.y[name, n, i] = pulp.LpVariable(f"y_{name}_{n}_{i}", 0, job.replicas, cat="Integer")

    _gang_constraints(m, jobs)
    _node_constraints(m, s, layout, jobs)
    alloc = _queue_allocations(m, s)
    _queue_constraints(m, s, alloc, fair, before, layout, cand)
    _stages(m, s, alloc, fair, before, cand, layout, jobs, mix)
    return m


def _gang_constraints(m: Program, jobs: dict[str, Job]) -> None:
    placed: dict[str, dict] = defaultdict(dict)
    for (p, _n), var in m.x.items():
        placed[p][var] = 1
    for (p, _n, _i), var in m.y.items():
        placed[p][var] = 1
    for p, start in m.start.items():
        # sum_n x[p,n] + sum_{n,i} y[p,n,i] = replicas[p] * start[p]
        terms = dict(placed[p])
        terms[start] = -jobs[p].replicas
        m.prob += affine(terms) == 0, f"gang_{p}"


def _node_constraints(m: Program, s: Scenario, layout: Layout, jobs: dict[str, Job]) -> None:
    x_by_node: dict[str, list] = defaultdict(list)
    for (p, n), var in m.x.items():
        x_by_node[n].append((jobs[p], var))
    y_by_gpu: dict[tuple[str, int], list] = defaultdict(list)
    for (p, n, i), var in m.y.items():
        y_by_gpu[n, i].append((jobs[p], var))
    y_by_node: dict[str, list] = defaultdict(list)
    for (p, n, _i), var in m.y.items():
        y_by_node[n].append((jobs[p], var))
    running_on: dict[str, list[Job]] = defaultdict(list)
    for job in s.jobs:
        for n in set(job.running):
            running_on[n].append(job)
    touched = set(x_by_node) | set(y_by_node)
    touched |= {n for v in m.keep for n in jobs[v].running}
    for n in sorted(touched):
        nl = layout.nodes[n]
        gpu_terms: dict = defaultdict(float)
        gpu_const = 0.0
        opened_free: list = []  # z of free GPUs that may receive fractions, in index order
        for i, slot in enumerate(nl.slots):
            if not nl.healthy(i):
                continue
            shares: dict[str, float] = defaultdict(float)  # a fractional gang may put two replicas here
            for name, f in slot.fractions:
                if name in m.keep:
                    shares[name] += f
            var_fracs = [(m.keep[name], f) for name, f in shares.items()]
            fixed_frac = sum(f for name, f in slot.fractions if name not in m.keep)
            new_fracs = y_by_gpu.get((n, i), [])
            if slot.whole:
                if slot.whole in m.keep:
                    gpu_terms[m.keep[slot.whole]] += 1
                else:
                    gpu_const += 1
            if new_fracs or var_fracs:
                if fixed_frac > 0:
                    shared = None  # shared anyway: counts as one used GPU
                    gpu_const += 1
                else:
                    shared = pulp.LpVariable(f"z_{n}_{i}", cat="Binary")
                    gpu_terms[shared] += 1
                    if slot.free:
                        opened_free.append(shared)
                    for keep, _f in var_fracs:
                        m.prob += shared >= keep, f"shared_{n}_{i}_{keep.name}"
                    for job, var in new_fracs:
                        m.prob += job.replicas * shared >= var, f"shared_{n}_{i}_{var.name}"
                # fractions_on_gpu + whole_holder_kept <= 1
                terms: dict = defaultdict(float)
                for keep, f in var_fracs:
                    terms[keep] += f
                for job, var in new_fracs:
                    terms[var] += job.gpus
                if slot.whole in m.keep:
                    terms[m.keep[slot.whole]] += 1
                elif slot.whole:
                    continue  # held by a fixed whole job: no candidate was made here
                m.prob += affine(terms, fixed_frac) <= 1, f"gpu_{n}_{i}"
            elif slot.fractions:
                gpu_const += 1
        for lower, higher in zip(opened_free, opened_free[1:]):
            # free GPUs of a node are interchangeable: open them for fractions in index order
            m.prob += lower >= higher, f"order_{higher.name}"
        for job, var in x_by_node.get(n, []):
            gpu_terms[var] += job.gpus
        # whole GPUs kept + started + shared GPUs <= healthy GPUs of n
        m.prob += affine(gpu_terms, gpu_const) <= len(nl.node.healthy_gpus), f"cap_gpu_{n}"
        for resource in ("cpu", "memory_gib"):
            capacity = getattr(nl.node, resource)
            if capacity is None:
                continue
            terms, const = defaultdict(float), 0.0
            for job in running_on[n]:
                use = (getattr(job, resource) or 0) * job.running.count(n)
                if use and job.name in m.keep:
                    terms[m.keep[job.name]] += use
                else:
                    const += use
            for job, var in x_by_node.get(n, []) + y_by_node.get(n, []):
                terms[var] += getattr(job, resource) or 0
            # sum of resource used on n <= capacity of n
            m.prob += affine(terms, const) <= capacity, f"cap_{resource}_{n}"


def _held_after(m: Program, jobs: list[Job]) -> tuple[dict, float]:
    """GPUs `jobs` hold after the plan, as (terms, constant): decided jobs are
    variables, running jobs that cannot change are a constant."""
    terms, const = {}, 0.0
    for job in jobs:
        if job.name in m.keep:
            terms[m.keep[job.name]] = job.total_gpus
        elif job.name in m.start:
            terms[m.start[job.name]] = job.total_gpus
        elif job.is_running:
            const += job.total_gpus
    return terms, const


def _queue_allocations(m: Program, s: Scenario) -> dict[str, tuple[dict, float]]:
    """GPUs each leaf queue holds after the plan, as (terms, constant)."""
    return {q.name: _held_after(m, [j for j in s.jobs if j.queue == q.name]) for q in s.queues}


def _subtree(s: Scenario, alloc: dict, name: str) -> tuple[dict, float]:
    terms, const = {}, 0.0
    for leaf in s.leaf_queue_names(name):
        t, c = alloc[leaf]
        terms.update(t)
        const += c
    return terms, const


def _queue_constraints(m: Program, s: Scenario, alloc: dict, fair: dict[str, int],
                       before: dict[str, float], layout: Layout, cand: Candidates) -> None:
    big = s.gpus_total + sum(j.total_gpus for j in s.jobs) + 1
    jobs_of: dict[str, list[Job]] = defaultdict(list)
    for job in s.jobs:
        jobs_of[job.queue].append(job)
    for q in s.queues:
        terms, const = _subtree(s, alloc, q.name)
        if not terms:
            continue
        held = sum(before[leaf] for leaf in s.leaf_queue_names(q.name))
        if q.limit is not None:
            # allocated_after[q] <= max(limit[q], allocated_before[q])
            m.prob += affine(terms, const) <= max(q.limit, held), f"limit_{q.name}"
        leaves = s.leaf_queue_names(q.name)
        open_to_reclaim = any(leaf in cand.standing.reclaimable for leaf in leaves)
        if not open_to_reclaim and any(v in terms for v in m.keep.values()):
            # allocated_after[q] >= min(allocated_before[q], fair_share[q]): a queue that no
            # other queue may reclaim from loses GPUs only to its own higher-priority work
            m.prob += affine(terms, const) >= min(held, fair[q.name]), f"floor_{q.name}"
        _no_swap_inside(m, q.name, jobs_of[q.name])
        pinned = [j for j in jobs_of[q.name] if not j.is_preemptible]
        np_terms, np_const = _held_after(m, pinned)
        for job in pinned:
            if job.name in m.start:
                # non-preemptible work of q after the plan <= deserved[q] when this job starts
                # (preemptible work may still borrow beyond deserved)
                t = dict(np_terms)
                t[m.start[job.name]] = t.get(m.start[job.name], 0) + big
                m.prob += affine(t, np_const) <= q.deserved + big, f"deserved_{job.name}"
    if m.keep:
        free_before = sum(len(nl.free_indices()) for nl in layout.nodes.values())
        borrow = {}
        for q in s.queues:
            if s.children(q.name):
                continue
            terms, const = alloc[q.name]
            if not terms:
                continue
            borrow[q.name] = pulp.LpVariable(f"borrow_{q.name}", lowBound=0)
            t = dict(terms)
            t[borrow[q.name]] = -1
            # borrow[q] >= allocated_after[q] - max(fair_share[q], allocated_before[q])
            m.prob += affine(t, const) <= max(fair[q.name], before[q.name]), f"borrow_def_{q.name}"
        # borrowing beyond a fair share uses GPUs that were free, never reclaimed ones
        m.prob += affine({b: 1 for b in borrow.values()}) <= free_before, "borrow_from_free"
        _receiving_constraints(m, s, alloc, layout, cand, jobs_of)


def _no_swap_inside(m: Program, queue: str, mine: list[Job]) -> None:
    """Inside a queue only a strictly higher priority preempts: when the plan preempts one
    of the queue's jobs of priority >= P, none of its waiting jobs of priority <= P starts.
    Without it, a job preempted as a legal victim for another queue could be swapped for
    its own queue's lower-priority work, and the next plan would swap back.

    sum of preempted[v] over own victims v with priority >= P <= count * swap[q,P], and
    sum of start[p] over own waiting p with priority <= P <= count * (1 - swap[q,P]).
    """
    victims = [j for j in mine if j.name in m.keep]
    waiting = [j for j in mine if j.name in m.start]
    for level in sorted({p.priority for p in waiting}):
        hit = [v for v in victims if v.priority >= level]
        held = [p for p in waiting if p.priority <= level]
        if not hit or not held:
            continue
        swap = pulp.LpVariable(f"swap_{queue}_{level}", cat="Binary")
        preempted = {m.keep[v.name]: -1 for v in hit}
        preempted[swap] = -len(hit)
        m.prob += affine(preempted, len(hit)) <= 0, f"swap_{queue}_{level}"
        starts = {m.start[p.name]: 1 for p in held}
        starts[swap] = len(held)
        m.prob += affine(starts) <= len(held), f"no_swap_{queue}_{level}"


def _receiving_constraints(m: Program, s: Scenario, alloc: dict, layout: Layout, cand: Candidates,
                           jobs_of: dict[str, list[Job]]) -> None:
    """A queue that takes reclaimed GPUs ends within its cap; others use only free GPUs.

    receives[R] = 1 lets queue R use GPUs freed from other queues' victims, and then
    allocated_after[R] <= cap[R] (its fair share, or its deserved quota when only the
    deserved tier lets it reclaim). With receives[R] = 0, on every node that holds
    another queue's victim, R's new work fits in what was free plus what R's own
    victims free there.
    """
    jobs = {j.name: j for j in s.jobs}
    usage: dict[tuple[str, str], dict] = defaultdict(dict)  # (queue, node) -> new work
    for (p, n), var in m.x.items():
        usage[jobs[p].queue, n][var] = jobs[p].gpus
    for (p, n, _i), var in m.y.items():
        terms = usage[jobs[p].queue, n]
        terms[var] = terms.get(var, 0) + jobs[p].gpus
    victims_on: dict[str, list[Job]] = defaultdict(list)
    for name in m.keep:
        for n in set(jobs[name].running):
            victims_on[n].append(jobs[name])
    for r, cap in sorted(cand.receivers.items()):
        receives = pulp.LpVariable(f"receives_{r}", cat="Binary")
        terms, const = alloc[r]
        big = sum(j.total_gpus for j in jobs_of[r])
        t = dict(terms)
        t[receives] = big
        # allocated_after[R] <= cap[R] + big * (1 - receives[R])
        m.prob += affine(t, const) <= cap + big, f"receive_cap_{r}"
        for n in sorted(victims_on):
            if (r, n) not in usage or all(v.queue == r for v in victims_on[n]):
                continue
            nl = layout.nodes[n]
            t = dict(usage[r, n])
            for v in victims_on[n]:
                if v.queue == r:
                    t[m.keep[v.name]] = t.get(m.keep[v.name], 0) + v.gpus * v.running.count(n)
            t[receives] = -len(nl.node.healthy_gpus)
            own = sum(v.gpus * v.running.count(n) for v in victims_on[n] if v.queue == r)
            # new_work[R,n] <= free[n] + freed_by_own_victims[R,n] + gpus[n] * receives[R]
            m.prob += affine(t) <= len(nl.free_indices()) + own, f"receive_{r}_{n}"


def _stages(m: Program, s: Scenario, alloc: dict, fair: dict[str, int], before: dict[str, float],
            cand: Candidates, layout: Layout, jobs: dict[str, Job], mix: WorkloadMix) -> None:
    # stage 1: shortfall to fair share of the queues that have a claim (below their share
    # before the plan), per priority level inside the queue; a victim's loss is no claim
    shortfall: dict = {}
    for q in s.queues:
        if s.children(q.name):
            continue
        mine = [j for j in s.jobs if j.queue == q.name]
        for level in sorted({j.priority for j in mine}):
            upper = [j for j in mine if j.priority >= level]
            demand = sum(j.total_gpus for j in upper)
            target = min(fair[q.name], demand)
            held = sum(j.total_gpus for j in upper if j.is_running)
            terms, const = _held_after(m, upper)
            if not terms or target <= held + 1e-9:
                continue
            short = pulp.LpVariable(f"short_{q.name}_{level}", lowBound=0)
            terms[short] = 1
            # short[q,P] >= target[q,P] - allocated_after[q, priority >= P]
            m.prob += affine(terms, const) >= target, f"short_def_{q.name}_{level}"
            shortfall[short] = 1
    if shortfall:
        m.stages.append(("fairness", affine(shortfall)))
    # stage 2, one per victim tier, solved busiest first so that the last tiers go first:
    # by priority, highest first, and idle jobs of queues above their share last of all
    def tier(name: str) -> tuple[int, int]:
        return (0, 0) if name in cand.idle else (1, jobs[name].priority)

    for key in sorted({tier(name) for name in m.keep}, reverse=True):
        tiered = [name for name in m.keep if tier(name) == key]
        m.stages.append(("preemption_idle" if key[0] == 0 else f"preemption_p{key[1]}",
                         affine({m.keep[n]: -cand.cost[n] for n in tiered}, sum(cand.cost[n] for n in tiered))))
    if m.start:
        order = sorted(m.start, key=lambda p: (-jobs[p].priority, jobs[p].submitted_at, p))
        smallest = min(jobs[p].total_gpus for p in order)
        tie = 1e-3 * smallest / (len(order) + 1)
        value = {m.start[p]: -(jobs[p].total_gpus + tie * (len(order) - r) / len(order))
                 for r, p in enumerate(order)}
        m.stages.append(("starts", affine(value)))
        m.stages.append(("packing", _packing_objective(m, s, layout, jobs, mix)))


def _packing_objective(m: Program, s: Scenario, layout: Layout, jobs: dict[str, Job],
                       mix: WorkloadMix) -> pulp.LpAffineExpression:
    """Open as few empty nodes as possible; among equals, the placements that grow
    the expected fragmentation least (`gpu_policy.planner.packing`)."""
    options = [(jobs[p], n, None) for p, n in m.x] + [(jobs[p], n, i) for p, n, i in m.y]
    costs = placement_costs(s, layout, mix, options)
    keys = list(m.x.values()) + list(m.y.values())
    scale = sum(abs(c) * job.replicas for c, (job, _n, _g) in zip(costs, options)) + 1
    objective: dict = {var: cost / scale for var, cost in zip(keys, costs)}
    used_on: dict[str, dict] = defaultdict(dict)
    for (p, n), var in m.x.items():
        used_on[n][var] = jobs[p].gpus
    for (p, n, _i), var in m.y.items():
        used_on[n][var] = used_on[n].get(var, 0) + jobs[p].gpus
    for n, terms in sorted(used_on.items()):
        nl = layout.nodes[n]
        if all(slot.free for slot in nl.slots):
            opened = pulp.LpVariable(f"opened_{n}", cat="Binary")
            t = dict(terms)
            t[opened] = -max(1, len(nl.node.healthy_gpus))
            # work placed on n <= capacity[n] * opened[n]
            m.prob += affine(t) <= 0, f"opened_def_{n}"
            objective[opened] = 1
    return affine(objective)
