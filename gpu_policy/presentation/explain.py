"""`explain`: why one job waits and the smallest change that lets it start, or why it runs
where it runs and what would stop it; every change is found and confirmed by planning the
changed scenario, so an answer never claims more than the planner would do.

Kinds of change tried for a waiting job, each searched for its smallest size by bisection:
more free GPUs on one node (a new empty node of k GPUs of a model the job accepts, in the
domain closest to holding it where the job requires a topology level), another job leaving
(a running one finishing, a waiting one withdrawn), the jobs that leave the closest domain
for a job that requires one (`NoDomainFits`), its queue's (or a department's) limit raised
to L, its queue's deserved quota raised to D. For a running job:
the fewest GPUs asked by its own queue (one priority higher) or by another queue for which
the planner would stop it. The number of plans is bounded (`max_plans`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

from gpu_policy.model import placement
from gpu_policy.errors import GpuPolicyError
from gpu_policy.model import Job, Node, Queue, Scenario
from gpu_policy.model.apply import apply_plan
from gpu_policy.model.layout import running_layout
from gpu_policy.model.plan import STOPS, JobDecision, Plan
from gpu_policy.model.topology import Domains
from gpu_policy.planner import PlannerConfig, plan, start_order

#: A name no scenario uses, for the node and the jobs an explanation adds.
_PROBE = "explain-probe"


@dataclass
class Change:
    """One change to the cluster that the planner confirms makes the difference."""

    kind: str   # free_gpus | job_leaves | domain | limit | deserved | queue_users | claim | time
    size: float  # GPUs added, freed, the new limit or quota, the claim's GPUs
    text: str
    scenario: Scenario = field(repr=False, compare=False)  # the changed scenario, as planned

    def to_dict(self) -> dict:
        return {"kind": self.kind, "size": self.size, "text": self.text}


@dataclass
class Explanation:
    """What `gpu-policy explain` says about one job."""

    job: str
    queue: str
    action: str
    code: str
    reason: str
    position: int | None = None  # among its queue's waiting jobs, in start order (1: next)
    queue_waiting: int = 0
    cluster_position: int | None = None  # among all waiting jobs that could ever fit
    runs_on: str = ""  # where it runs, or starts or moves to in this plan
    changes: list[Change] = field(default_factory=list)  # would start it (waiting) or stop it (running)
    plans: int = 0  # plans made to find the changes

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["changes"] = [c.to_dict() for c in self.changes]
        return out


class Prober:
    """Plans changed scenarios, at most `max_plans` of them, and says what one plan does to the job."""

    def __init__(self, config: PlannerConfig | None, signals, max_plans: int,
                 progress: Callable[[str], None] | None = None):
        self.config, self.signals, self.max_plans, self.progress = config, signals, max_plans, progress
        self.plans = 0

    @property
    def spent(self) -> bool:
        return self.plans >= self.max_plans

    def action(self, s: Scenario, job: str) -> str | None:
        """The job's action in the plan of `s` (None: the budget of plans is spent)."""
        if self.spent:
            return None
        self.plans += 1
        if self.progress:
            self.progress(f"explain: plan {self.plans} of at most {self.max_plans}")
        return plan(s, self.config, self.signals).job(job).action

    def smallest(self, lo: int, hi: int, changed: Callable[[int], Scenario], job: str,
                 wanted: tuple[str, ...]) -> tuple[int, Scenario, str] | None:
        """The smallest size in [lo, hi] whose changed scenario gives the job a `wanted`
        action, with the scenario and the action, by bisection (hi is tried first; the
        answer is always one that was planned)."""
        if hi < lo:
            return None
        s = changed(hi)
        got = self.action(s, job)
        if got not in wanted:
            return None
        best = (hi, s, got)
        while lo < best[0] and not self.spent:
            mid = (lo + best[0]) // 2
            s = changed(mid)
            got = self.action(s, job)
            if got in wanted:
                best = (mid, s, got)
            else:
                lo = mid + 1
        return best


def explain(s: Scenario, name: str, config: PlannerConfig | None = None, signals=None, max_plans: int = 40,
            progress: Callable[[str], None] | None = None) -> Explanation:
    """Explain job `name` of the validated scenario `s` (its plan made with `signals`)."""
    by_name = {j.name: j for j in s.jobs}
    if name not in by_name:
        raise GpuPolicyError(f"explain: no job {name!r} in {s.source or 'the cluster'}")
    job = by_name[name]
    prober = Prober(config, signals, max_plans, progress)
    base = plan(s, config, signals)
    d = base.job(name)
    out = Explanation(job.name, job.queue, d.action, d.code, d.reason)
    if not job.is_running:
        order = start_order(s)
        mine = [j.name for j in order if j.queue == job.queue]
        out.queue_waiting = len(mine)
        if name in mine:
            out.position = mine.index(name) + 1
            out.cluster_position = [j.name for j in order].index(name) + 1
    out.runs_on = _where(d) if d.action in ("keep", "start", "move") else ""
    if d.action == "wait":
        out.changes = _what_starts(s, job, base, prober)
    elif d.action == "keep":
        out.reason = _why_it_runs(job, base)
        out.changes = _what_stops(s, job, prober)
    out.plans = prober.plans
    return out


def _where(d: JobDecision) -> str:
    return " ".join(f"{r.node}[{','.join(map(str, r.gpu_indices))}]" for r in d.replicas)


def _gpus(n: float) -> str:
    return f"{n:g} GPU" + ("" if n == 1 else "s")


def _with_jobs(s: Scenario, jobs: list[Job]) -> Scenario:
    return dataclasses.replace(s, jobs=jobs, expect=None)


# ---- a waiting job: what would start it -------------------------------------------------

def _what_starts(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    found = []
    for search in (_queue_opened, _limit_raised, _time_passes, _domain_freed, _free_gpus, _job_leaves,
                   _deserved_raised):
        if prober.spent:
            break
        found += search(s, job, base, prober)
    return found


def _limit_raised(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    """The smallest limit of each limited queue or department above the job that lets it start."""
    found = []
    queues = {q.name: q for q in s.queues}
    report = {q.name: q for q in base.queues}
    entity = job.queue
    while entity is not None:
        q = queues[entity]
        if q.limit is not None:
            def changed(limit: int, e=entity) -> Scenario:
                return dataclasses.replace(s, queues=[dataclasses.replace(x, limit=limit) if x.name == e else x
                                                      for x in s.queues], expect=None)
            lo = int(math.floor(q.limit)) + 1
            hi = int(math.ceil(max(q.limit, report[entity].allocated_after) + job.total_gpus))
            best = prober.smallest(lo, hi, changed, job.name, ("start",))
            if best:
                found.append(Change("limit", best[0], f"starts if {entity}'s limit is raised from {q.limit:g} "
                                                      f"to {best[0]}", best[1]))
        entity = q.parent
    return found


def _deserved_raised(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    """The smallest raise of the deserved quotas of the job's queue and, in turn, of the
    departments above it (all by the same number of GPUs) that lets it start."""
    queues = {q.name: q for q in s.queues}
    path = [job.queue]
    while queues[path[-1]].parent is not None:
        path.append(queues[path[-1]].parent)
    for top in range(len(path)):
        raised = path[:top + 1]
        if prober.spent:
            break

        def changed(by: int, raised=raised) -> Scenario:
            return dataclasses.replace(s, queues=[dataclasses.replace(x, deserved=x.deserved + by)
                                                  if x.name in raised else x for x in s.queues], expect=None)

        best = prober.smallest(1, max(1, s.gpus_total), changed, job.name, ("start",))
        if best:
            by = best[0]
            quotas = ", ".join(f"{e}'s from {queues[e].deserved:g} to {queues[e].deserved + by:g}" for e in raised)
            return [Change("deserved", by, f"starts if deserved quotas are raised by {by}: {quotas}", best[1])]
    return []


def _queue_opened(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    """A job its queue does not admit (`NotAllowedInQueue`): the queue listing its namespace."""
    namespace = placement.namespace_of(job)
    queue = next(q for q in s.queues if q.name == job.queue)
    if namespace is None or base.job(job.name).code != "NotAllowedInQueue":
        return []
    opened = dataclasses.replace(s, queues=[dataclasses.replace(q, namespaces=[*(q.namespaces or []), namespace])
                                            if q is queue else q for q in s.queues], expect=None)
    if prober.action(opened, job.name) != "start":
        return []
    return [Change("queue_users", 0, f"starts if queue {queue.name} lists namespace {namespace} in its namespaces",
                   opened)]


def _closest_domain(s: Scenario, job: Job, base: Plan) -> tuple[str, list[str]] | None:
    """For a job that requires a topology level: the domain of it with the most free GPUs the
    job could use after the plan `base`, as (its name, its nodes the job fits), or None."""
    if not job.topology or job.topology.required is None:
        return None
    d = Domains.of(s)
    free = {name: len(nl.free_indices()) for name, nl in running_layout(apply_plan(s, base)).nodes.items()}
    fits = {n.name for n in s.nodes if job.fits_model(n) and placement.admits(n, placement.constraints_of(job))}
    domains = [(sum(free[n] for n in nodes if n in fits), key, [n for n in nodes if n in fits])
               for key, nodes in d.nodes[d.level(job.topology.required)].items()]
    domains = [x for x in domains if x[2]]
    if not domains:
        return None
    _, key, nodes = max(domains, key=lambda x: x[0])
    return f"{job.topology.required} {Domains.name(key)}", nodes


def _domain_freed(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    """For a job that waits for a domain (`NoDomainFits`): the fewest running jobs of the
    closest domain, lowest priority and smallest first, whose end lets it start there."""
    if base.job(job.name).code != "NoDomainFits" or (closest := _closest_domain(s, job, base)) is None:
        return []
    where, nodes = closest
    inside = set(nodes)
    held = sorted((j for j in s.jobs if j.is_running and j.name != job.name and inside.intersection(j.running)),
                  key=lambda j: (j.priority, j.total_gpus, j.name))

    def changed(k: int) -> Scenario:
        gone = {j.name for j in held[:k]}
        return _with_jobs(s, [j for j in s.jobs if j.name not in gone])

    best = prober.smallest(1, len(held), changed, job.name, ("start",)) if held else None
    if not best:
        return []
    gone = held[:best[0]]
    names = ", ".join(j.name for j in gone[:4]) + (f" and {len(gone) - 4} more" if len(gone) > 4 else "")
    return [Change("domain", sum(j.total_gpus for j in gone),
                   f"starts in {where}, the closest to holding it, when {names} "
                   f"({_gpus(sum(j.total_gpus for j in gone))}) {'leaves' if len(gone) == 1 else 'leave'} it",
                   best[1])]


def _model_for(s: Scenario, job: Job, base: Plan | None = None) -> Node:
    """The node a new node copies: the largest one of a model the job accepts and whose
    placement constraints admit it (its CPUs and memory raised to what the job asks), else a
    bare node of the job's first model labelled as its node selector and affinity ask. For a
    job that requires a topology level (and `base`, its plan), one of the domain closest to
    holding it, so that the new node joins that domain."""
    closest = _closest_domain(s, job, base) if base is not None else None
    if closest is not None:
        s = dataclasses.replace(s, nodes=[n for n in s.nodes if n.name in set(closest[1])])
    fits = [n for n in s.nodes if job.fits_model(n) and placement.admits(n, placement.constraints_of(job))]
    if fits:
        like = max(fits, key=lambda n: (n.gpus, n.name))
    else:
        like = Node(_PROBE, 0, gpu_model=job.gpu_model[0] if job.gpu_model else None, labels=_labels_asked(job))

    def enough(have: float | None, want: float | None) -> float | None:
        return None if have is None else max(have, want or 0)

    return dataclasses.replace(like, name=_PROBE, cpu=enough(like.cpu, job.cpu),
                               memory_gib=enough(like.memory_gib, job.memory_gib), unhealthy_gpus=[], taints=[])


def _labels_asked(job: Job) -> dict[str, str]:
    """Node labels that meet the job's node selector and its first required affinity term
    (In: the first value; Exists: any; Gt and Lt: one past the bound)."""
    labels = dict(job.node_selector)
    for e in (job.node_affinity or [{}])[0].get("match_expressions") or []:
        values, op = e.get("values") or [], e["operator"]
        if op == "In":
            labels[e["key"]] = values[0]
        elif op == "Exists":
            labels.setdefault(e["key"], "true")
        elif op in ("Gt", "Lt"):
            labels[e["key"]] = str(int(values[0]) + (1 if op == "Gt" else -1))
    return labels


def _free_gpus(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    """The fewest free GPUs on one more node that let the job start."""
    like = _model_for(s, job, base)
    per = 1 if job.is_fractional else int(job.gpus)

    def changed(k: int) -> Scenario:
        return dataclasses.replace(s, nodes=[*s.nodes, dataclasses.replace(like, gpus=k)], expect=None)

    others = sum(j.total_gpus for j in s.jobs if not j.is_running and j.name != job.name)
    hi = per * job.replicas + int(math.ceil(min(others, s.gpus_total)))
    best = prober.smallest(per, hi, changed, job.name, ("start",))
    if not best:
        return []
    k = best[0]
    node = ", ".join(f"{label}{value:g}{unit}" if unit else f"{label}{value}" for label, value, unit in
                     (("model ", like.gpu_model, ""), ("", like.cpu, " CPUs"), ("", like.memory_gib, " GiB"),
                      ("labels ", ",".join(f"{k}={v}" for k, v in sorted(like.labels.items())) or None, ""))
                     if value is not None)
    return [Change("free_gpus", k, f"starts with {_gpus(k)} more free on one node (planned with a new empty "
                                   f"node of {_gpus(k)}{': ' + node if node else ''})", best[1])]


#: Most jobs tried, one plan each, for "another job leaves".
_LEAVERS = 8


def _job_leaves(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    """The smallest other job whose end (running) or withdrawal (waiting, ahead of it) lets
    the job start: one from another queue and one from its own, where there are such."""
    ahead = {j.name for j in start_order(s)}
    candidates = [j for j in s.jobs if j.name != job.name and (j.is_running or j.name in ahead)]
    useful = [j for j in candidates if not j.is_running or any(job.fits_model(s.node(n)) for n in j.running)]
    useful.sort(key=lambda j: (j.queue == job.queue, not j.is_running, j.total_gpus, j.name))
    found, sides = [], set()  # sides: whether a change from its own queue (True) or another (False) was found
    for other in useful[:_LEAVERS]:
        if (other.queue == job.queue) in sides or prober.spent:
            continue
        changed = _with_jobs(s, [j for j in s.jobs if j.name != other.name])
        if prober.action(changed, job.name) == "start":
            sides.add(other.queue == job.queue)
            verb = "finishes" if other.is_running else "is withdrawn"
            found.append(Change("job_leaves", other.total_gpus,
                                f"starts when {other.queue}'s job {other.name} ({_gpus(other.total_gpus)}) {verb}",
                                changed))
    return found


def _time_passes(s: Scenario, job: Job, base: Plan, prober: Prober) -> list[Change]:
    """For a job its queue's preemption delay holds back, or whose victims their minimum
    runtime protects: the fewest seconds after which it starts, if nothing else changes (every
    known wait and run time grows by them), among the moments a delay or a minimum runtime ends."""
    if base.job(job.name).code not in ("PreemptionDelay", "MinRuntime"):
        return []
    queues = {q.name: q for q in s.queues}
    ends = {queues[job.queue].preemption_delay_s - job.waiting_for_s} if job.waiting_for_s is not None else set()
    ends |= {queues[j.queue].min_runtime_s - j.running_for_s for j in s.jobs if j.running and j.running_for_s is not None}
    for seconds in sorted(t for t in ends if t > 0):
        if prober.spent:
            break
        changed = _with_jobs(s, [_older(j, seconds) for j in s.jobs])
        if prober.action(changed, job.name) == "start":
            return [Change("time", seconds, f"starts in {seconds:.0f} s, when its queue's preemption delay or the "
                                            "minimum runtime of the jobs it would take has passed", changed)]
    return []


def _older(job: Job, seconds: float) -> Job:
    """`job` `seconds` later: its known run and wait times grown by them."""
    return dataclasses.replace(
        job, running_for_s=None if job.running_for_s is None else job.running_for_s + seconds,
        waiting_for_s=None if job.waiting_for_s is None else job.waiting_for_s + seconds)


# ---- a running job: why it runs and what would stop it ----------------------------------

def _why_it_runs(job: Job, base: Plan) -> str:
    q = next(r for r in base.queues if r.name == job.queue)
    kind = "non-preemptible" if not job.is_preemptible else f"preemptible, priority {job.priority}"
    share = ("within" if q.allocated_after <= q.fair_share else "above")
    return (f"runs ({kind}); {q.name} holds {q.allocated_after:g} GPUs after the plan, {share} its fair share of "
            f"{q.fair_share_words} (deserved {q.deserved:g})")


def _what_stops(s: Scenario, job: Job, prober: Prober) -> list[Change]:
    """The fewest GPUs that each queue could ask (in jobs of one GPU) for which the planner
    would preempt or move this job: one priority above it in its own queue, 50 in others."""
    if not job.is_preemptible:
        return []
    found = []
    leaves = [q for q in s.queues if not s.children(q.name)]
    leaves.sort(key=lambda q: (q.name != job.queue, q.name))
    for q in leaves[:4]:
        if prober.spent:
            break
        priority = job.priority + 1 if q.name == job.queue else 50

        def changed(count: int, queue: Queue = q, priority: int = priority) -> Scenario:
            claims = [Job(f"{_PROBE}-{i}", queue.name, 1, priority=priority, gpu_model=job.gpu_model,
                          submitted_at=-1) for i in range(count)]
            return _with_jobs(s, [*s.jobs, *claims])

        best = prober.smallest(1, max(1, s.gpus_total), changed, job.name, STOPS)
        if best:
            count, scenario, stopped = best
            found.append(Change("claim", count,
                                f"{'preempted' if stopped == 'preempt' else 'moved'} if {q.name} asks for "
                                f"{_gpus(count)} more ({count} job{'s' if count > 1 else ''} of 1 GPU, "
                                f"priority {priority})", scenario))
    return found
