"""Why a job waits or was preempted, in words a person understands."""

from __future__ import annotations

from gpu_policy.model import Job, Scenario
from gpu_policy.plan import Placement
from gpu_policy.planner.layout import Layout


def _gpus(n: float) -> str:
    return f"{n:g} GPU" + ("" if n == 1 else "s")


def never_fits(job: Job, s: Scenario) -> str | None:
    """Why no node of the cluster could ever run one replica, or None."""
    nodes = [n for n in s.nodes if job.fits_model(n)]
    if not nodes:
        return f"no node has GPU model {' or '.join(job.gpu_model or [])}"
    need = 1 if job.is_fractional else job.gpus
    biggest = max(len(n.healthy_gpus) for n in nodes)
    if biggest < need:
        return f"needs {_gpus(need)} on one node; the largest node has {biggest} healthy"
    if not job.is_fractional and sum(len(n.healthy_gpus) // int(need) for n in nodes) < job.replicas:
        return f"a gang of {job.replicas} replicas x {_gpus(need)} is more than the whole cluster holds"
    for resource, unit in (("cpu", "CPUs"), ("memory_gib", "GiB of memory")):
        want = getattr(job, resource)
        sizes = [getattr(n, resource) for n in nodes if getattr(n, resource) is not None]
        if want and sizes and len(sizes) == len(nodes) and max(sizes) < want:
            return f"needs {want:g} {unit} per replica; the largest node has {max(sizes):g}"
    return None


def wait_reason(job: Job, s: Scenario, after: Layout, held_after: dict[str, float],
                fair: dict[str, int], spare: dict[str, dict[str, float]], running: set[str], limits=None) -> str:
    """Why `job` waits, judged on the cluster as the plan leaves it.

    `spare` maps node -> {"cpu": free cores, "memory_gib": free GiB} after the plan
    (only for nodes that declare them); `running` names the jobs that run after it.
    """
    q = s.queue(job.queue)
    permanent = never_fits(job, s)
    if permanent:
        return f"can never fit: {permanent}"
    held = held_after[q.name]
    if q.limit is not None and held + job.total_gpus > q.limit:
        return f"{q.name} is at its limit: holds {held:g} of {_gpus(q.limit)}"
    pinned = sum(j.total_gpus for j in s.jobs if j.queue == q.name and not j.is_preemptible and j.name in running)
    if not job.is_preemptible and pinned + job.total_gpus > q.deserved:
        return (f"non-preemptible jobs start only within deserved: {q.name}'s would hold "
                f"{pinned + job.total_gpus:g} of its {q.deserved:g} deserved GPUs")
    if job.is_fractional:
        room = max((1 - sl.used for nl in after.nodes.values() for i, sl in enumerate(nl.slots)
                    if nl.healthy(i) and not sl.whole and job.fits_model(nl.node)), default=0)
        if room < job.gpus - 1e-9:
            return f"needs {job.gpus:g} of a GPU; the most room on any GPU is {room:g}"
        if limits is not None:
            shareable = [(nl.node.name, i) for nl in after.nodes.values() for i, sl in enumerate(nl.slots)
                         if nl.healthy(i) and not sl.whole and 1 - sl.used >= job.gpus - 1e-9 and job.fits_model(nl.node)]
            fresh = any(after.nodes[n].slots[i].free for n, i in shareable)
            if shareable and not fresh and not any(limits.room_for_fraction(n, i, job.gpus) for n, i in shareable):
                return (f"needs {job.gpus:g} of a GPU; every GPU with room is busy (above the utilisation "
                        "limit for sharing) or lacks the framebuffer memory")
    else:
        block = max((len(nl.free_indices()) for nl in after.nodes.values() if job.fits_model(nl.node)),
                    default=0)
        if block < job.gpus:
            gang = f" for each of {job.replicas} replicas" if job.replicas > 1 else ""
            return f"needs {_gpus(job.gpus)} on one node{gang}; the largest free block is {block}"
        room = sum(len(nl.free_indices()) // int(job.gpus) for nl in after.nodes.values() if job.fits_model(nl.node))
        if room < job.replicas:
            return (f"a gang of {job.replicas} replicas x {_gpus(job.gpus)}; "
                    f"the free GPUs hold only {room} such replicas now")
    for resource, unit in (("cpu", "CPUs"), ("memory_gib", "GiB of memory")):
        want = getattr(job, resource) or 0
        room = [free[resource] for free in spare.values() if resource in free]
        if want and room and len(room) == len(s.nodes) and max(room) < want:
            return f"needs {want:g} {unit} per replica; the most free on any node is {max(room):g}"
    if held >= fair[q.name]:
        return (f"{q.name} holds {held:g} GPUs, at or above its fair share of {fair[q.name]}; "
                "the free GPUs are kept for queues below theirs")
    return (f"no room that the rules allow: free GPUs are too scattered for {job.replicas} "
            f"replicas, or taking them would push another queue below its fair share")


def preempt_reason(job: Job, s: Scenario, before: dict[str, float], fair: dict[str, int],
                   starters: list[Job], idle_s: float | None = None) -> str:
    why = _preempt_why(job, before, fair, starters)
    return f"{why}; idle for {idle_s / 60:.0f} min" if idle_s is not None else why


def _preempt_why(job: Job, before: dict[str, float], fair: dict[str, int], starters: list[Job]) -> str:
    q = job.queue
    mine = [p.name for p in starters if p.queue == q and p.priority > job.priority]
    if before[q] > fair[q] and any(p.queue != q for p in starters):
        takers = sorted({p.queue for p in starters if p.queue != q})
        return (f"reclaimed for {', '.join(takers)}: {q} held {before[q]:g} GPUs, "
                f"above its fair share of {fair[q]}")
    if mine:
        return f"preempted inside {q} for higher-priority {', '.join(mine)}"
    return f"preempted: {q} held {before[q]:g} GPUs, above its fair share of {fair[q]}"


def move_reason(job: Job, to: Placement, started: dict[str, list[Placement]]) -> str:
    """Why a running job restarts elsewhere: the jobs its old GPUs let start."""
    source = job.running[0]
    names = sorted(name for name, replicas in started.items() if any(p.node == source for p in replicas))
    gain = f"so that {', '.join(names)} fit{'s' if len(names) == 1 else ''} there" if names else "to make room"
    return f"moved from {source} to {to.node} {gain}; restarts from its checkpoint"
