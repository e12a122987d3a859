"""The checks across a scenario's sections (docs/scenario.md): queues name known parents and make
no cycle, jobs name known queues (not departments) and topology levels, and running jobs name
known nodes, one per replica, and fit where they run (GPUs, CPU and memory, MIG slices, GPU
indices).

`check_across` checks a whole scenario (a file read, a scenario built in code);
`check_across_some` checks only some of its jobs, nodes and nodes' loads, for a scenario that
differs from one that passed the whole check only in those (a controller's look keeps the jobs
and nodes no watch event changed: gpu_policy.kubernetes.read.memo). The first problem raises a
ScenarioError naming the field path; `check_across_some` does not know where a job is in the
list, so its paths name the job as `jobs[-1]`: a caller that shows the problem checks the whole.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from gpu_policy.errors import ScenarioError, job_path
from gpu_policy.model import Job, Node, Scenario
from gpu_policy.model.fields import MAX_DEPARTMENT_DEPTH, show

_SOMEWHERE = -1  # the index `check_across_some` names a job by


def check_across(s: Scenario) -> None:
    """Every check across the sections of `s`, in the order a file's problems are found."""
    queues, departments = _queue_references(s)
    for i, job in enumerate(s.jobs):
        _job_references(s, i, job, queues, departments)
    depth = _levels(s)
    for i, job in enumerate(s.jobs):
        _job_topology(s, i, job, depth)
    nodes = {n.name: n for n in s.nodes}
    for i, n in enumerate(s.nodes):
        _node_gpus(s, i, n)
    load = _Load(s)
    for i, job in enumerate(s.jobs):
        _job_placement(s, i, job)
        load.add(i, job, nodes)
    load.room(nodes)


def check_across_some(s: Scenario, jobs: Iterable[Job], nodes: Iterable[Node],
                      loads: Iterable[tuple[Node, list[Job]]]) -> None:
    """The checks across sections of `s` that concern `jobs` and `nodes`, and the load of each
    node of `loads` (with the jobs running on it, in the scenario's order); the queues and levels
    are checked whole."""
    queues, departments = _queue_references(s)
    depth = _levels(s)
    named = {n.name: n for n in s.nodes}
    for job in jobs:
        _job_references(s, _SOMEWHERE, job, queues, departments)
        _job_topology(s, _SOMEWHERE, job, depth)
        _job_placement(s, _SOMEWHERE, job)
        for r in range(len(job.running)):
            _replica_node(s, _SOMEWHERE, r, job, named)
    for n in nodes:
        _node_gpus(s, _SOMEWHERE, n)
    for node, running in loads:
        load = _Load(s)
        for job in running:
            load.add(_SOMEWHERE, job, named, node.name)
        load.room({node.name: node})


def _queue_references(s: Scenario) -> tuple[dict, set[str]]:
    """Queue parents are queues and make no cycle; the queues by name and the departments."""
    queues = {q.name: q for q in s.queues}
    for i, q in enumerate(s.queues):
        if q.parent is not None and q.parent not in queues:
            raise ScenarioError(s.source, f"queues[{i}].parent", f"unknown queue {show(q.parent)}")
    for i, q in enumerate(s.queues):  # a loop, not recursion: chains are bounded here
        seen, cur = {q.name}, q.parent
        while cur is not None:
            if cur in seen:
                raise ScenarioError(s.source, f"queues[{i}].parent", f"makes a cycle through {show(cur)}")
            if len(seen) > MAX_DEPARTMENT_DEPTH:
                raise ScenarioError(s.source, f"queues[{i}].parent",
                                    f"departments must nest at most {MAX_DEPARTMENT_DEPTH} levels deep")
            seen.add(cur)
            cur = queues[cur].parent
    return queues, {q.parent for q in s.queues if q.parent}


def _job_references(s: Scenario, i: int, job: Job, queues: dict, departments: set[str]) -> None:
    prefix, slash, _ = job.name.partition("/")
    if job.namespace is not None and slash and prefix != job.namespace:
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.namespace",
                            f"must be the namespace its name gives ({show(prefix)}), got {show(job.namespace)}")
    if job.queue not in queues:
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.queue", f"unknown queue {show(job.queue)}")
    if job.queue in departments:
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.queue",
                            f"{show(job.queue)} is a department (it has queues below it); "
                            "submit the job to one of its queues")


def _levels(s: Scenario) -> dict[str, int]:
    """Levels have distinct labels; each level's depth by name."""
    seen: dict[str, int] = {}
    for i, level in enumerate(s.topology):
        if level.label in seen:
            raise ScenarioError(s.source, f"topology[{i}].label", f"{show(level.label)} is already the label of "
                                                                  f"{show(s.topology[seen[level.label]].name)}")
        seen[level.label] = i
    return {level.name: i for i, level in enumerate(s.topology)}


def _job_topology(s: Scenario, i: int, job: Job, depth: dict[str, int]) -> None:
    """A job's levels are the scenario's, its preferred one narrower than its required one (a
    wider one would add nothing)."""
    if job.topology is None:
        return
    path = f"{job_path(i, job.name)}.topology"
    for key in ("required", "preferred"):
        level = getattr(job.topology, key)
        if level is not None and level not in depth:
            known = ", ".join(depth) if depth else "none: the scenario has no topology section"
            raise ScenarioError(s.source, f"{path}.{key}", f"names no topology level (levels: {known}), "
                                                           f"got {show(level)}")
    required, preferred = job.topology.required, job.topology.preferred
    if required is not None and preferred is not None and depth[preferred] <= depth[required]:
        raise ScenarioError(s.source, f"{path}.preferred",
                            f"must be a level narrower than the required {show(required)}, got {show(preferred)}")


def _node_gpus(s: Scenario, i: int, n: Node) -> None:
    """Unhealthy GPUs are GPUs the node has; a node's GPUs are MIG slices or shared, not both."""
    for k, g in enumerate(n.unhealthy_gpus):
        if g >= n.gpus:
            raise ScenarioError(s.source, f"nodes[{i}].unhealthy_gpus[{k}]",
                                f"must be below the node's {n.gpus} GPUs, got {g}")
    if n.mig and n.gpu_sharing:
        raise ScenarioError(s.source, f"nodes[{i}].mig", "a node's GPUs are MIG slices or shared, not both")


def _job_placement(s: Scenario, i: int, job: Job) -> None:
    """A running job names one node per replica (a gang all or none) and GPU indices for each; a
    MIG slice is at most one GPU."""
    if job.mig_profile and job.gpus > 1:
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpus",
                            f"a MIG slice is at most one GPU, got {show(job.gpus)}")
    if len(job.running) > job.replicas:
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.running",
                            f"names {len(job.running)} nodes but the job has {job.replicas} replicas")
    if job.running and len(job.running) < job.replicas:
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.running",
                            f"a gang runs all {job.replicas} replicas or none, got {len(job.running)} nodes")
    if job.gpu_indices is not None and len(job.gpu_indices) != len(job.running):
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpu_indices",
                            f"must have one entry per running replica ({len(job.running)}), "
                            f"got {len(job.gpu_indices)}")


def _replica_node(s: Scenario, i: int, r: int, job: Job, nodes: dict[str, Node]) -> Node:
    """The node the job's replica `r` runs on, a node of the scenario."""
    node = nodes.get(job.running[r])
    if node is None:  # job_path is written out only in an error: 21,000 jobs a look
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.running[{r}]", f"unknown node {show(job.running[r])}")
    return node


class _Load:
    """What the running jobs use of each node, added job by job in the scenario's order: MIG
    slices and GPU indices checked as they come, the room once all are there."""

    def __init__(self, s: Scenario):
        self.s = s
        self.used: dict[str, dict[str, float]] = defaultdict(lambda: {"gpus": 0.0, "cpu": 0.0, "memory_gib": 0.0})
        self.per_gpu: dict[tuple[str, int], float] = {}
        self.slices: dict[tuple[str, str], int] = defaultdict(int)

    def add(self, i: int, job: Job, nodes: dict[str, Node], only: str | None = None) -> None:
        """The job's replicas (on `only`, when given) as used."""
        for r, node_name in enumerate(job.running):
            if only is not None and node_name != only:
                continue
            node = _replica_node(self.s, i, r, job, nodes)
            self._slice(i, r, job, node)
            used = self.used[node_name]
            used["gpus"] += job.gpus
            used["cpu"] += job.cpu or 0
            used["memory_gib"] += job.memory_gib or 0
            if job.gpu_indices is not None:
                self._indices(i, r, job, node, job.gpu_indices[r])

    def room(self, nodes: dict[str, Node]) -> None:
        """What the running jobs use of each of `nodes` fits in it (GPUs, and CPU and memory where given)."""
        s = self.s
        for name, node in nodes.items():
            used = self.used.get(name)
            if used is None:
                continue
            for resource, capacity in (("gpus", node.gpus), ("cpu", node.cpu), ("memory_gib", node.memory_gib)):
                if capacity is not None and used[resource] > capacity + 1e-9:
                    culprit = next(i for i, j in enumerate(s.jobs) if name in j.running)
                    raise ScenarioError(s.source, f"{job_path(culprit, s.jobs[culprit].name)}.running",
                                        f"node {show(name)} has no room: its running jobs use "
                                        f"{used[resource]:g} {resource} of {capacity:g}")

    def _slice(self, i: int, r: int, job: Job, node: Node) -> None:
        """A MIG job runs on a slice of its profile that the node has; other jobs not on MIG GPUs."""
        if not job.mig_profile and not node.mig:
            return
        path = f"{job_path(i, job.name)}.running[{r}]"
        if not job.mig_profile:
            raise ScenarioError(self.s.source, path,
                                f"node {show(node.name)} has MIG slices only; the job asks for none")
        self.slices[node.name, job.mig_profile] += 1
        if self.slices[node.name, job.mig_profile] > node.mig.get(job.mig_profile, 0):
            raise ScenarioError(self.s.source, path, f"node {show(node.name)} has {node.mig.get(job.mig_profile, 0)} "
                                                     f"{job.mig_profile} slices; its running jobs use more")

    def _indices(self, i: int, r: int, job: Job, node: Node, idx: list[int]) -> None:
        s = self.s
        want = 1 if job.is_fractional else int(job.gpus)
        if len(idx) != want or len(set(idx)) != len(idx):
            raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpu_indices[{r}]",
                                f"must list {want} distinct GPU indices, got {show(idx)}")
        for g in idx:
            if g >= node.gpus:
                raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpu_indices[{r}]",
                                    f"GPU {g} does not exist on {node.name} ({node.gpus} GPUs)")
            share = job.gpus if job.is_fractional else 1.0
            self.per_gpu[(node.name, g)] = self.per_gpu.get((node.name, g), 0.0) + share
            if self.per_gpu[(node.name, g)] > 1 + 1e-9:
                raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpu_indices[{r}]",
                                    f"GPU {g} of {node.name} is already fully used")
