"""Load, validate and write scenario files (the contract in docs/scenario.md).

Everything is checked before any solving; the first problem found raises a
`ScenarioError` whose message names the file and the field path, e.g.
``seed.yaml: jobs[3] (name: b-3).gpus: must be > 0, got -1`` (a job is named where it has a name).
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable

from gpu_policy.model.fields import (
    COMPOSABLE_FIELDS, COMPOSABLE_NODE_FIELDS, COMPOSITION_CHANGE, FAULT_FIELDS, JOB_FIELDS, MAX_CLUSTER_GPUS,
    MAX_ITEMS, MAX_MEMORY, NAMESPACE_FIELDS, NODE_FIELDS, POLICY_FIELDS, POOL_FIELDS, PROFILE_FIELDS,
    QUEUE_FIELDS, REQUIRED, TOPOLOGY_FIELDS,
    Invalid, number, optional, positive, show, unknown_field)
from gpu_policy.errors import InputError, ScenarioError, job_path
from gpu_policy.model import (Composable, ComposableNode, ComposablePool, Job, Namespace, Node, Policy, Queue,
                              Scenario, TopologyLevel)
from gpu_policy.model.plan import QueueReport
from gpu_policy.model.safe_load import DEFAULT_LIMITS, InputLimits, load_file, parse_text
from gpu_policy.model.scenario import API_VERSION
from gpu_policy.model.scenario_checks import check_across, check_across_some
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


def check_built(scenario: Scenario, composable: Any = None) -> Scenario:
    """Validate a scenario built in code (the Kubernetes mapping builds one per look) as
    `parse_scenario` validates one read from a file, without writing it out and reading it
    back: every field that is not its default passes its field check, names are unique, and
    the cross checks (references, placements, `composable`, the section as a file has it)
    hold. The first problem raises a ScenarioError naming the field path."""
    for section, cls, checks in _SECTIONS:
        items = getattr(scenario, section)
        _check_count(scenario, section, items)
        seen = set()
        for i, item in enumerate(items):
            _check_fields(scenario.source, section, i, item, REQUIRED[cls], checks)
            if item.name in seen:
                raise ScenarioError(scenario.source, f"{_path(section, i, item)}.name",
                                    f"duplicate name {show(item.name)}")
            seen.add(item.name)
    _check_cluster_gpus(scenario.nodes, scenario.source)
    return _check_whole(scenario, composable)


def check_changed(scenario: Scenario, composable: Any, jobs: list[Job], nodes: list[Node],
                  loads: list[tuple[Node, list[Job]]], aged: dict[str, tuple[float, float]]) -> Scenario:
    """`check_built` for a scenario that differs from one that passed it only in `jobs` and
    `nodes` (objects not checked yet), in the jobs running on the nodes of `loads` (each with
    its running jobs, in the scenario's order), and in the job fields of `aged` set anew on
    kept jobs (field -> the least and the most value set: each is a range); its queues,
    namespaces and levels are checked whole. A controller's look keeps what no watch event
    changed (gpu_policy.kubernetes.read.memo). A problem raises the ScenarioError
    `check_built` raises, naming the first problem of the whole scenario."""
    try:
        for section, cls, checks in _SECTIONS:
            items = getattr(scenario, section)
            _check_count(scenario, section, items)
            if len(set(map(attrgetter("name"), items))) != len(items):
                raise ScenarioError(scenario.source, section, "duplicate names")
            for item in {"jobs": jobs, "nodes": nodes}.get(section, items):
                _check_fields(scenario.source, section, -1, item, REQUIRED[cls], checks)
        for name, bounds in aged.items():
            for value in bounds:
                JOB_FIELDS[name](value)
        _check_cluster_gpus(scenario.nodes, scenario.source)
        return _check_whole(scenario, composable, lambda s: check_across_some(s, jobs, nodes, loads))
    except (ScenarioError, Invalid):
        check_built(scenario, composable)  # the first problem, as the whole scenario's check finds it
        raise


def _check_count(scenario: Scenario, section: str, items: list) -> None:
    if len(items) > MAX_ITEMS[section]:
        raise ScenarioError(scenario.source, section,
                            f"must have at most {MAX_ITEMS[section]:,} entries, got {len(items):,}")


def _path(section: str, i: int, item: Any) -> str:
    return job_path(i, item.name) if section == "jobs" else f"{section}[{i}]"


def _check_fields(source: str, section: str, i: int, item: Any, required: Any, checks: dict) -> None:
    """Every required field of a built item (`section`[`i`]) is there, and every field that is
    not its default passes its check."""
    for name in required:
        if getattr(item, name) is None:
            raise ScenarioError(source, f"{_path(section, i, item)}.{name}", "is required")
    for key, value in vars(item).items():
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


def _check_whole(scenario: Scenario, composable: Any,
                 across: Callable[[Scenario], None] = check_across) -> Scenario:
    """The checks across sections, once every item is built; `composable` is the section as read;
    `across`: the checks across jobs and nodes (`check_changed`: those of what changed)."""
    scenario.composable = _build_composable(composable, scenario)
    across(scenario)
    _check_expect(scenario)
    _check_telemetry(scenario)
    return scenario


def _no_unknown_keys(item: dict, allowed: set[str], path: str, source: str) -> None:
    for key in item:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise ScenarioError(source, where, unknown_field(key, allowed))


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
