"""Load, validate and write scenario files (the contract in docs/scenario.md).

Everything is checked before any solving; the first problem found raises a
`ScenarioError` whose message names the file and the field path, e.g.
``seed.yaml: jobs[3] (name: b-3).gpus: must be > 0, got -1`` (a job is named where it has a name).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from gpu_policy.model.fields import (
    COMPOSABLE_FIELDS, COMPOSABLE_NODE_FIELDS, COMPOSITION_CHANGE, FAULT_FIELDS, JOB_FIELDS, MAX_CLUSTER_GPUS,
    MAX_DEPARTMENT_DEPTH, MAX_ITEMS, MAX_MEMORY, NAMESPACE_FIELDS, NODE_FIELDS, POLICY_FIELDS, POOL_FIELDS, PROFILE_FIELDS,
    QUEUE_FIELDS, REQUIRED, TOPOLOGY_FIELDS,
    Invalid, number, optional, positive, show)
from gpu_policy.errors import InputError, ScenarioError, job_path
from gpu_policy.model import (Composable, ComposableNode, ComposablePool, Job, Namespace, Node, Policy, Queue,
                              Scenario, TopologyLevel)
from gpu_policy.model.plan import QueueReport
from gpu_policy.model.safe_load import DEFAULT_LIMITS, InputLimits, load_file, parse_text
from gpu_policy.model.scenario import API_VERSION
from gpu_policy.model.scenario_dump import plain_data

ACTIONS = ("keep", "start", "preempt", "move", "wait")
_TOP_KEYS = {"apiVersion", "kind", "nodes", "queues", "jobs", "namespaces", "composable", "expect", "telemetry",
             "policy", "topology"}


def load_scenario(path: str | Path, limits: InputLimits = DEFAULT_LIMITS) -> Scenario:
    """Read a YAML or JSON scenario file (within `limits`) and validate it."""
    return _as_scenario_error(lambda: parse_scenario(load_file(path, limits), str(path)))


def parse_scenario_text(text: str, source: str, limits: InputLimits = DEFAULT_LIMITS) -> Scenario:
    """Validate scenario text read from elsewhere (a ConfigMap, a pipeline parameter)."""
    return _as_scenario_error(lambda: parse_scenario(parse_text(text, source, limits), source))


def _as_scenario_error(load: Callable[[], Scenario]) -> Scenario:
    try:
        return load()
    except ScenarioError:
        raise
    except InputError as e:  # the safe loader's own error, about the same file
        raise ScenarioError(e.source, e.field, e.problem) from None


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate an already-parsed mapping and build the Scenario."""
    if not isinstance(data, dict):
        raise ScenarioError(source, "", "must be a mapping with nodes, queues and jobs")
    _no_unknown_keys(data, _TOP_KEYS, "", source)
    if data.get("apiVersion", API_VERSION) != API_VERSION:
        raise ScenarioError(source, "apiVersion", f"must be {API_VERSION}, got {show(data['apiVersion'])}")
    if data.get("kind", "Scenario") != "Scenario":
        raise ScenarioError(source, "kind", f"must be Scenario, got {show(data['kind'])}")
    nodes = _build_all(data, "nodes", Node, NODE_FIELDS, source)
    _check_cluster_gpus(nodes, source)
    scenario = Scenario(
        nodes=nodes,
        queues=_build_all(data, "queues", Queue, QUEUE_FIELDS, source),
        jobs=_build_all(data, "jobs", Job, JOB_FIELDS, source),
        expect=data.get("expect"),
        source=source,
        telemetry=data.get("telemetry"),
        namespaces=_build_all(data, "namespaces", Namespace, NAMESPACE_FIELDS, source),
        policy=_build_policy(data.get("policy"), source),
        topology=_build_all(data, "topology", TopologyLevel, TOPOLOGY_FIELDS, source),
    )
    return _check_whole(scenario, data.get("composable"))


def _build_policy(section: Any, source: str) -> Policy:
    """The `policy:` section (absent: every default)."""
    if section is None:
        return Policy()
    return Policy(**_checked_fields(section, POLICY_FIELDS, (), "policy", source))


#: the sections of a scenario built in code: (section, its type, its field checks)
_SECTIONS = (("nodes", Node, NODE_FIELDS), ("queues", Queue, QUEUE_FIELDS), ("jobs", Job, JOB_FIELDS),
             ("namespaces", Namespace, NAMESPACE_FIELDS), ("topology", TopologyLevel, TOPOLOGY_FIELDS))


def check_built(scenario: Scenario, composable: Any = None,
                unchecked: Callable[[Any], tuple[str, ...] | None] = lambda item: None) -> Scenario:
    """Validate a scenario built in code (the Kubernetes mapping builds one per look) as
    `parse_scenario` validates one read from a file, without writing it out and reading it
    back: every field that is not its default passes its field check, names are unique, and
    the cross checks (references, placements, `composable`, the section as a file has it)
    hold. The first problem raises a ScenarioError naming the field path. `unchecked(item)`: the
    fields of an item still to check, None for all (the controller's looks keep the jobs and
    nodes no watch event changed, their fields checked once; a kept job's ages change)."""
    for section, cls, checks in _SECTIONS:
        items, seen = getattr(scenario, section), set()
        if len(items) > MAX_ITEMS[section]:
            raise ScenarioError(scenario.source, section,
                                f"must have at most {MAX_ITEMS[section]:,} entries, got {len(items):,}")
        for i, item in enumerate(items):
            fields = unchecked(item)
            if fields is None:
                _check_fields(scenario.source, section, i, item, REQUIRED[cls], checks)
            elif fields:
                _check_fields(scenario.source, section, i, item, (), checks, fields)
            if item.name in seen:
                raise ScenarioError(scenario.source, f"{_path(section, i, item)}.name",
                                    f"duplicate name {show(item.name)}")
            seen.add(item.name)
    _check_cluster_gpus(scenario.nodes, scenario.source)
    return _check_whole(scenario, composable)


def _path(section: str, i: int, item: Any) -> str:
    return job_path(i, item.name) if section == "jobs" else f"{section}[{i}]"


def _check_fields(source: str, section: str, i: int, item: Any, required: Any, checks: dict,
                  only: Any = None) -> None:
    """Every required field of a built item (`section`[`i`]) is there, and every field (of
    `only`, when given) that is not its default passes its check."""
    for name in required:
        if getattr(item, name) is None:
            raise ScenarioError(source, f"{_path(section, i, item)}.{name}", "is required")
    for key, value in vars(item).items() if only is None else ((k, getattr(item, k)) for k in only):
        if value is None or (type(value) in (list, dict) and not value):
            continue  # the field's default: what scenario_to_dict leaves out
        try:
            checks[key](plain_data(value))  # as a file has it: a queue's model quotas, a node's sharing as mappings
        except Invalid as e:
            raise ScenarioError(source, f"{_path(section, i, item)}.{key}{e.at}", str(e)) from None


def _check_cluster_gpus(nodes: list[Node], source: str) -> None:
    total = sum(n.gpus for n in nodes)
    if total > MAX_CLUSTER_GPUS:
        raise ScenarioError(source, "nodes", f"must hold at most {MAX_CLUSTER_GPUS:,} GPUs in all, got {total:,}")


def _check_whole(scenario: Scenario, composable: Any) -> Scenario:
    """The checks across sections, once every item is built; `composable` is the section as read."""
    scenario.composable = _build_composable(composable, scenario)
    _check_references(scenario)
    _check_topology(scenario)
    _check_placements(scenario)
    _check_expect(scenario)
    _check_telemetry(scenario)
    return scenario


def _no_unknown_keys(item: dict, allowed: set[str], path: str, source: str) -> None:
    for key in item:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise ScenarioError(source, where, f"unknown field (allowed: {', '.join(sorted(allowed))})")


def _build_all(data: dict, section: str, cls: type, checks: dict, source: str, within: str = "",
               key: str = "name") -> list:
    """The list `data[section]` (at `within` + section in messages), each item checked and built;
    no two share their `key`."""
    where = f"{within}{section}"
    items = data.get(section)
    if items is None:
        items = []
    if not isinstance(items, list):
        raise ScenarioError(source, where, f"must be a list, got {show(items)}")
    if len(items) > MAX_ITEMS[section]:
        raise ScenarioError(source, where, f"must have at most {MAX_ITEMS[section]:,} entries, got {len(items):,}")
    built, seen = [], set()
    for i, item in enumerate(items):
        path = job_path(i, item.get("name") if isinstance(item, dict) else None) if where == "jobs" \
            else f"{where}[{i}]"
        values = _checked_fields(item, checks, REQUIRED[cls], path, source)
        if values.get("running") is None:
            values.pop("running", None)
        obj = cls(**values)
        if getattr(obj, key) in seen:
            raise ScenarioError(source, f"{path}.{key}", f"duplicate {key} {show(getattr(obj, key))}")
        seen.add(getattr(obj, key))
        built.append(obj)
    return built


def _checked_fields(item: Any, checks: dict, required: tuple[str, ...], path: str, source: str) -> dict:
    """A mapping's fields after their checks; the first bad or missing one raises."""
    if not isinstance(item, dict):
        raise ScenarioError(source, path, f"must be a mapping, got {show(item)}")
    _no_unknown_keys(item, set(checks), path, source)
    for name in required:
        if item.get(name) is None:
            raise ScenarioError(source, f"{path}.{name}", "is required")
    values = {}
    for key, value in item.items():
        try:
            values[key] = checks[key](value)
        except Invalid as e:
            raise ScenarioError(source, f"{path}.{key}{e.at}", str(e)) from None
    return values


def _section(s: Scenario, value: Any, name: str, allowed: set[str]) -> bool:
    """Whether an optional top-level section is there; if so it must be a mapping of `allowed` keys."""
    if value is None:
        return False
    if not isinstance(value, dict):
        raise ScenarioError(s.source, name, f"must be a mapping, got {show(value)}")
    _no_unknown_keys(value, allowed, name, s.source)
    return True


def _build_composable(c: Any, s: Scenario) -> Composable | None:
    """The optional `composable:` section: pools by model, composable nodes of the scenario."""
    if not _section(s, c, "composable", set(COMPOSABLE_FIELDS) | {"pools", "nodes"}):
        return None
    settings = _checked_fields({k: v for k, v in c.items() if k in COMPOSABLE_FIELDS}, COMPOSABLE_FIELDS, (),
                               "composable", s.source)
    pools = _build_all(c, "pools", ComposablePool, POOL_FIELDS, s.source, "composable.", key="model")
    nodes = _build_all(c, "nodes", ComposableNode, COMPOSABLE_NODE_FIELDS, s.source, "composable.")
    total = s.gpus_total + sum(p.free for p in pools)
    if total > MAX_CLUSTER_GPUS:
        raise ScenarioError(s.source, "composable.pools",
                            f"nodes and pools must hold at most {MAX_CLUSTER_GPUS:,} GPUs in all, got {total:,}")
    known = {n.name: n for n in s.nodes}
    models = {p.model for p in pools}
    for i, cn in enumerate(nodes):
        path = f"composable.nodes[{i}]"
        node = known.get(cn.name)
        if node is None:
            raise ScenarioError(s.source, f"{path}.name", f"unknown node {show(cn.name)}")
        if cn.max_gpus < node.gpus:
            raise ScenarioError(s.source, f"{path}.max_gpus",
                                f"must be at least the node's {node.gpus} GPUs, got {cn.max_gpus}")
        if cn.attached > node.gpus:
            raise ScenarioError(s.source, f"{path}.attached",
                                f"must be at most the node's {node.gpus} GPUs, got {cn.attached}")
        if cn.attached and node.gpu_model not in models:
            why = (f"{cn.name} has no gpu_model" if node.gpu_model is None
                   else f"composable.pools has no model {show(node.gpu_model)}, the model of {cn.name}")
            raise ScenarioError(s.source, f"{path}.attached", f"attached GPUs go back to their model's pool, but {why}")
    return Composable(pools=pools, nodes=nodes, **settings)


def _check_topology(s: Scenario) -> None:
    """Levels have distinct labels; a job's levels are the scenario's, its preferred one
    narrower than its required one (a wider one would add nothing)."""
    seen: dict[str, int] = {}
    for i, level in enumerate(s.topology):
        if level.label in seen:
            raise ScenarioError(s.source, f"topology[{i}].label",
                                f"{show(level.label)} is already the label of {show(s.topology[seen[level.label]].name)}")
        seen[level.label] = i
    depth = {level.name: i for i, level in enumerate(s.topology)}
    for i, job in enumerate(s.jobs):
        if job.topology is None:
            continue
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


def _check_references(s: Scenario) -> None:
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
    departments = {q.parent for q in s.queues if q.parent}
    for i, job in enumerate(s.jobs):
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


def _check_placements(s: Scenario) -> None:
    """Running jobs name real nodes, one per replica, and fit where they run."""
    nodes = {n.name: n for n in s.nodes}
    _check_node_gpus(s)
    load: dict[str, dict[str, float]] = {n: {"gpus": 0.0, "cpu": 0.0, "memory_gib": 0.0} for n in nodes}
    per_gpu: dict[tuple[str, int], float] = {}
    slices: dict[tuple[str, str], int] = defaultdict(int)
    for i, job in enumerate(s.jobs):
        _check_replicas(s, i, job)  # job_path(i, ...) is written out only in an error: 21,000 jobs a look
        for r, node_name in enumerate(job.running):
            if node_name not in nodes:
                raise ScenarioError(s.source, f"{job_path(i, job.name)}.running[{r}]",
                                    f"unknown node {show(node_name)}")
            node = nodes[node_name]
            _check_slice(s, i, r, job, node, slices)
            load[node_name]["gpus"] += job.gpus
            load[node_name]["cpu"] += job.cpu or 0
            load[node_name]["memory_gib"] += job.memory_gib or 0
            if job.gpu_indices is not None:
                _check_indices(s, i, r, job, node, job.gpu_indices[r], per_gpu)
    _check_room(s, nodes, load)


def _check_node_gpus(s: Scenario) -> None:
    """Unhealthy GPUs are GPUs the node has; a node's GPUs are MIG slices or shared, not both."""
    for i, n in enumerate(s.nodes):
        for k, g in enumerate(n.unhealthy_gpus):
            if g >= n.gpus:
                raise ScenarioError(s.source, f"nodes[{i}].unhealthy_gpus[{k}]",
                                    f"must be below the node's {n.gpus} GPUs, got {g}")
        if n.mig and n.gpu_sharing:
            raise ScenarioError(s.source, f"nodes[{i}].mig", "a node's GPUs are MIG slices or shared, not both")


def _check_replicas(s: Scenario, i: int, job: Job) -> None:
    """A running job names one node per replica (a gang all or none) and GPU indices for each."""
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


def _check_room(s: Scenario, nodes: dict[str, Node], load: dict[str, dict[str, float]]) -> None:
    """What the running jobs use of each node fits in it (GPUs, and CPU and memory where given)."""
    for name, used in load.items():
        node = nodes[name]
        for resource, capacity in (("gpus", node.gpus), ("cpu", node.cpu), ("memory_gib", node.memory_gib)):
            if capacity is not None and used[resource] > capacity + 1e-9:
                culprit = next(i for i, j in enumerate(s.jobs) if name in j.running)
                raise ScenarioError(s.source, f"{job_path(culprit, s.jobs[culprit].name)}.running",
                                    f"node {show(name)} has no room: its running jobs use "
                                    f"{used[resource]:g} {resource} of {capacity:g}")


def _check_slice(s: Scenario, i: int, r: int, job: Job, node: Node,
                 slices: dict[tuple[str, str], int]) -> None:
    """A MIG job runs on a slice of its profile that the node has; other jobs not on MIG GPUs."""
    if not job.mig_profile and not node.mig:
        return
    path = f"{job_path(i, job.name)}.running[{r}]"
    if not job.mig_profile:
        raise ScenarioError(s.source, path, f"node {show(node.name)} has MIG slices only; the job asks for none")
    slices[node.name, job.mig_profile] += 1
    if slices[node.name, job.mig_profile] > node.mig.get(job.mig_profile, 0):
        raise ScenarioError(s.source, path, f"node {show(node.name)} has {node.mig.get(job.mig_profile, 0)} "
                                            f"{job.mig_profile} slices; its running jobs use more")


def _check_indices(s: Scenario, i: int, r: int, job: Job, node: Node, idx: list[int],
                   per_gpu: dict[tuple[str, int], float]) -> None:
    want = 1 if job.is_fractional else int(job.gpus)
    if len(idx) != want or len(set(idx)) != len(idx):
        raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpu_indices[{r}]",
                            f"must list {want} distinct GPU indices, got {show(idx)}")
    for g in idx:
        if g >= node.gpus:
            raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpu_indices[{r}]",
                                f"GPU {g} does not exist on {node.name} ({node.gpus} GPUs)")
        share = job.gpus if job.is_fractional else 1.0
        per_gpu[(node.name, g)] = per_gpu.get((node.name, g), 0.0) + share
        if per_gpu[(node.name, g)] > 1 + 1e-9:
            raise ScenarioError(s.source, f"{job_path(i, job.name)}.gpu_indices[{r}]",
                                f"GPU {g} of {node.name} is already fully used")


#: The queue fields of a plan that `expect.queues` may pin (numbers, or null where a field may be absent).
_EXPECT_QUEUE_FIELDS = tuple(f.name for f in fields(QueueReport) if f.name not in ("name", "parent"))


def _mapping(s: Scenario, value: Any, path: str) -> dict:
    """An optional sub-section: absent is empty, anything but a mapping is an error."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ScenarioError(s.source, path, f"must be a mapping, got {show(value)}")
    return value


def _check_expect(s: Scenario) -> None:
    e = s.expect
    if not _section(s, e, "expect", {"jobs", "queues", "summary", "compositions"}):
        return
    jobs = {j.name for j in s.jobs}
    for name, want in _mapping(s, e.get("jobs"), "expect.jobs").items():
        if name not in jobs:
            raise ScenarioError(s.source, f"expect.jobs.{name}", "names no job of the scenario")
        _check_expected_job(s, f"expect.jobs.{name}", want)
    queues = {q.name for q in s.queues}
    for name, values in _mapping(s, e.get("queues"), "expect.queues").items():
        if name not in queues:
            raise ScenarioError(s.source, f"expect.queues.{name}", "names no queue of the scenario")
        values = _mapping(s, values, f"expect.queues.{name}")
        _no_unknown_keys(values, set(_EXPECT_QUEUE_FIELDS), f"expect.queues.{name}", s.source)
        for key, value in values.items():
            _field(s, f"expect.queues.{name}.{key}", value, optional(number))
    for key, value in _mapping(s, e.get("summary"), "expect.summary").items():
        if isinstance(value, dict):  # a summary field per level (largest_free_domain_after)
            for level, each in value.items():
                _field(s, f"expect.summary.{key}.{level}", each, number)
        else:
            _field(s, f"expect.summary.{key}", value, number)
    composable = {n.name for n in s.composable.nodes} if s.composable else set()
    for name, change in _mapping(s, e.get("compositions"), "expect.compositions").items():
        if name not in composable:
            raise ScenarioError(s.source, f"expect.compositions.{name}", "names no composable node of the scenario")
        _field(s, f"expect.compositions.{name}", change, COMPOSITION_CHANGE)


#: What `expect.jobs.NAME` may pin beside the action, when it is a mapping.
_EXPECT_JOB_FIELDS = {"action", "code", "nodes"}


def _check_expected_job(s: Scenario, path: str, want: Any) -> None:
    """An action, or a mapping of the action and optionally the reason's code and the nodes
    the job's replicas are on after the plan."""
    if isinstance(want, dict):
        _no_unknown_keys(want, _EXPECT_JOB_FIELDS, path, s.source)
        if "action" not in want:
            raise ScenarioError(s.source, f"{path}.action", "is required")
        if "code" in want and not (isinstance(want["code"], str) and want["code"]):
            raise ScenarioError(s.source, f"{path}.code", f"must be a reason code, got {show(want['code'])}")
        if "nodes" in want:
            nodes = want["nodes"]
            if not (isinstance(nodes, list) and all(isinstance(n, str) and n in {x.name for x in s.nodes} for n in nodes)):
                raise ScenarioError(s.source, f"{path}.nodes", f"must be a list of the scenario's nodes, got {show(nodes)}")
        path, want = f"{path}.action", want["action"]
    if want not in ACTIONS:
        raise ScenarioError(s.source, path, f"must be one of {', '.join(ACTIONS)}, got {show(want)}")


def _field(s: Scenario, path: str, value: Any, check: Callable[[Any], Any]) -> Any:
    try:
        return check(value)
    except Invalid as e:
        raise ScenarioError(s.source, path, str(e)) from None


def _check_telemetry(s: Scenario) -> None:
    """The optional `telemetry:` section: per-job utilisation profiles and per-GPU faults."""
    t = s.telemetry
    if not _section(s, t, "telemetry", {"memory_mib", "jobs", "gpus"}):
        return
    _checked_fields({k: v for k, v in t.items() if k == "memory_mib"}, {"memory_mib": positive(MAX_MEMORY)}, (),
                    "telemetry", s.source)
    running = {j.name for j in s.jobs if j.is_running}
    for name, profile in _mapping(s, t.get("jobs"), "telemetry.jobs").items():
        if name not in running:
            raise ScenarioError(s.source, f"telemetry.jobs.{name}", "names no running job of the scenario")
        _checked_fields(profile, PROFILE_FIELDS, (), f"telemetry.jobs.{name}", s.source)
    faults = t.get("gpus")
    if faults is None:
        faults = []
    if not isinstance(faults, list):
        raise ScenarioError(s.source, "telemetry.gpus", f"must be a list, got {show(faults)}")
    nodes = {n.name: n for n in s.nodes}
    for i, fault in enumerate(faults):
        path = f"telemetry.gpus[{i}]"
        _checked_fields(fault, FAULT_FIELDS, ("node", "gpu"), path, s.source)
        if fault["node"] not in nodes:
            raise ScenarioError(s.source, f"{path}.node", f"unknown node {show(fault['node'])}")
        if fault["gpu"] >= nodes[fault["node"]].gpus:
            raise ScenarioError(s.source, f"{path}.gpu",
                                f"GPU {fault['gpu']} does not exist on {fault['node']} ({nodes[fault['node']].gpus} GPUs)")
