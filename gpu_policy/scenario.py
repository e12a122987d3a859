"""Load, validate and write scenario files (the contract in docs/scenario.md).

Everything is checked before any solving; the first problem found raises a
`ScenarioError` whose message names the file and the field path, e.g.
``seed.yaml: jobs[3].gpus: must be > 0, got -1``.
"""

from __future__ import annotations

import json
import math
import reprlib
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

import yaml

from gpu_policy.errors import InputError, ScenarioError
from gpu_policy.model import Job, Node, Queue, Scenario
from gpu_policy.safe_load import DEFAULT_LIMITS, InputLimits, load_file, parse_text

API_VERSION = "gpu-policy/v1alpha1"
ACTIONS = ("keep", "start", "preempt", "move", "wait")
_TOP_KEYS = {"apiVersion", "kind", "nodes", "queues", "jobs", "expect", "telemetry"}


#: Bounds on what one scenario may describe (docs/scenario.md, "Limits"): far above any
#: real cluster, low enough that no file can make the planner run out of memory.
MAX_GPUS_PER_NODE = 1024
MAX_REPLICAS = 100_000
MAX_ITEMS = {"nodes": 100_000, "queues": 2_000, "jobs": 100_000}
MAX_CLUSTER_GPUS = 1_000_000
MAX_DEPARTMENT_DEPTH = 32
INT64 = (-(2 ** 63), 2 ** 63 - 1)
_MAX_GPUS_OF_QUEUE = 1e9    # deserved, limit
_MAX_CPU = 1e6              # cores
_MAX_MEMORY = 1e9           # GiB or MiB
_MAX_SECONDS = 1e11         # about 3,000 years
_MAX_WEIGHT = 1e6


class _Invalid(Exception):
    """Raised by a field check; carries the text after `field: `."""


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxstring, _SHOW.maxother = 2, 6, 4, 60, 60


def _show(value: Any) -> str:
    """A value as a message shows it: bounded, whatever its size or depth."""
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 80 else value[:80] + "...")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10 ** 30:
        return f"a number of {len(str(abs(value))) if abs(value) < 10 ** 4000 else 'over 4000'} digits"
    return _SHOW.repr(value)


def _number(value: Any) -> float:
    """An int or a finite float (ints are never converted: a 400-digit one would overflow)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise _Invalid(f"must be a number, got {_show(value)}")
    return value


def _at_most(high: float) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value > high:
            raise _Invalid(f"must be at most {high:,.0f}, got {_show(value)}")
        return value
    return check


def _non_negative(high: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if _number(value) < 0:
            raise _Invalid(f"must be >= 0, got {_show(value)}")
        return _at_most(high)(value)
    return check


def _positive(high: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if _number(value) <= 0:
            raise _Invalid(f"must be > 0, got {_show(value)}")
        return _at_most(high)(value)
    return check


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _Invalid(f"must be a whole number, got {_show(value)}")
    return value


def _whole_in(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        number = _whole(value)
        if number < low:
            raise _Invalid(f"must be >= {low}, got {_show(value)}")
        if number > high:
            raise _Invalid(f"must be at most {high:,}, got {_show(value)}")
        return number
    return check


def _priority(value: Any) -> int:
    number = _whole(value)
    if not INT64[0] <= number <= INT64[1]:
        raise _Invalid(f"must be a whole number within int64, got {_show(value)}")
    return number


def _job_gpus(value: Any) -> float:
    _positive(MAX_GPUS_PER_NODE)(value)
    if value > 1 and not float(value).is_integer():
        raise _Invalid(f"a fraction of a GPU must be below 1, got {_show(value)}")
    return int(value) if float(value).is_integer() else float(value)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid(f"must be a non-empty string, got {_show(value)}")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"must be true or false, got {_show(value)}")
    return value


def _models(value: Any) -> list[str]:
    if isinstance(value, str):
        return [_text(value)]
    if not isinstance(value, list) or not value:
        raise _Invalid(f"must be a model name or a non-empty list of them, got {_show(value)}")
    return [_text(v) for v in value]


def _labels(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float, bool))
                                              for k, v in value.items()):
        raise _Invalid(f"must be a mapping of label names to values, got {_show(value)}")
    return {k: str(v) for k, v in value.items()}


_gpu_index = _whole_in(0, MAX_GPUS_PER_NODE - 1)


def _list_of(check: Callable[[Any], Any], what: str) -> Callable[[Any], list]:
    def checked(value: Any) -> list:
        if not isinstance(value, list):
            raise _Invalid(f"must be a list of {what}, got {_show(value)}")
        return [check(v) for v in value]
    return checked


_index_list = _list_of(_gpu_index, "GPU indices")
_node_names = _list_of(_text, "node names")
_indices_per_replica = _list_of(_index_list, "lists of GPU indices, one per replica")


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


# field name -> check; a field missing from the mapping keeps the dataclass default
_NODE_FIELDS = {
    "name": _text, "gpus": _whole_in(0, MAX_GPUS_PER_NODE), "gpu_model": _optional(_text),
    "cpu": _optional(_non_negative(_MAX_CPU)), "memory_gib": _optional(_non_negative(_MAX_MEMORY)),
    "labels": _labels, "unhealthy_gpus": _index_list,
}
_QUEUE_FIELDS = {
    "name": _text, "parent": _optional(_text), "deserved": _non_negative(_MAX_GPUS_OF_QUEUE),
    "limit": _optional(_non_negative(_MAX_GPUS_OF_QUEUE)), "over_quota_weight": _non_negative(_MAX_WEIGHT),
    "priority": _priority,
}
_JOB_FIELDS = {
    "name": _text, "queue": _text, "gpus": _job_gpus, "replicas": _whole_in(1, MAX_REPLICAS),
    "priority": _priority, "preemptible": _optional(_boolean), "gpu_model": _optional(_models),
    "cpu": _optional(_non_negative(_MAX_CPU)), "memory_gib": _optional(_non_negative(_MAX_MEMORY)),
    "running": _optional(_node_names), "gpu_indices": _optional(_indices_per_replica),
    "submitted_at": _non_negative(_MAX_SECONDS), "checkpoint_age_s": _optional(_non_negative(_MAX_SECONDS)),
}
_REQUIRED = {Node: ("name", "gpus"), Queue: ("name",), Job: ("name", "queue", "gpus")}


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
        raise ScenarioError(source, "apiVersion", f"must be {API_VERSION}, got {_show(data['apiVersion'])}")
    if data.get("kind", "Scenario") != "Scenario":
        raise ScenarioError(source, "kind", f"must be Scenario, got {_show(data['kind'])}")
    nodes = _build_all(data, "nodes", Node, _NODE_FIELDS, source)
    total = sum(n.gpus for n in nodes)
    if total > MAX_CLUSTER_GPUS:
        raise ScenarioError(source, "nodes", f"must hold at most {MAX_CLUSTER_GPUS:,} GPUs in all, got {total:,}")
    scenario = Scenario(
        nodes=nodes,
        queues=_build_all(data, "queues", Queue, _QUEUE_FIELDS, source),
        jobs=_build_all(data, "jobs", Job, _JOB_FIELDS, source),
        expect=data.get("expect"),
        source=source,
        telemetry=data.get("telemetry"),
    )
    _check_references(scenario)
    _check_placements(scenario)
    _check_expect(scenario)
    _check_telemetry(scenario)
    return scenario


def _no_unknown_keys(item: dict, allowed: set[str], path: str, source: str) -> None:
    for key in item:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise ScenarioError(source, where, f"unknown field (allowed: {', '.join(sorted(allowed))})")


def _build_all(data: dict, section: str, cls: type, checks: dict, source: str) -> list:
    items = data.get(section)
    if items is None:
        items = []
    if not isinstance(items, list):
        raise ScenarioError(source, section, f"must be a list, got {_show(items)}")
    if len(items) > MAX_ITEMS[section]:
        raise ScenarioError(source, section, f"must have at most {MAX_ITEMS[section]:,} entries, got {len(items):,}")
    built, seen = [], set()
    for i, item in enumerate(items):
        path = f"{section}[{i}]"
        values = _checked_fields(item, checks, _REQUIRED[cls], path, source)
        if values.get("running") is None:
            values.pop("running", None)
        obj = cls(**values)
        if obj.name in seen:
            raise ScenarioError(source, f"{path}.name", f"duplicate name {_show(obj.name)}")
        seen.add(obj.name)
        built.append(obj)
    return built


def _checked_fields(item: Any, checks: dict, required: tuple[str, ...], path: str, source: str) -> dict:
    """A mapping's fields after their checks; the first bad or missing one raises."""
    if not isinstance(item, dict):
        raise ScenarioError(source, path, f"must be a mapping, got {_show(item)}")
    _no_unknown_keys(item, set(checks), path, source)
    for name in required:
        if item.get(name) is None:
            raise ScenarioError(source, f"{path}.{name}", "is required")
    values = {}
    for key, value in item.items():
        try:
            values[key] = checks[key](value)
        except _Invalid as e:
            raise ScenarioError(source, f"{path}.{key}", str(e)) from None
    return values


def _section(s: Scenario, value: Any, name: str, allowed: set[str]) -> bool:
    """Whether an optional top-level section is there; if so it must be a mapping of `allowed` keys."""
    if value is None:
        return False
    if not isinstance(value, dict):
        raise ScenarioError(s.source, name, f"must be a mapping, got {_show(value)}")
    _no_unknown_keys(value, allowed, name, s.source)
    return True


def _check_references(s: Scenario) -> None:
    queues = {q.name: q for q in s.queues}
    for i, q in enumerate(s.queues):
        if q.parent is not None and q.parent not in queues:
            raise ScenarioError(s.source, f"queues[{i}].parent", f"unknown queue {_show(q.parent)}")
    for i, q in enumerate(s.queues):  # a loop, not recursion: chains are bounded here
        seen, cur = {q.name}, q.parent
        while cur is not None:
            if cur in seen:
                raise ScenarioError(s.source, f"queues[{i}].parent", f"makes a cycle through {_show(cur)}")
            if len(seen) > MAX_DEPARTMENT_DEPTH:
                raise ScenarioError(s.source, f"queues[{i}].parent",
                                    f"departments must nest at most {MAX_DEPARTMENT_DEPTH} levels deep")
            seen.add(cur)
            cur = queues[cur].parent
    departments = {q.parent for q in s.queues if q.parent}
    for i, job in enumerate(s.jobs):
        if job.queue not in queues:
            raise ScenarioError(s.source, f"jobs[{i}].queue", f"unknown queue {_show(job.queue)}")
        if job.queue in departments:
            raise ScenarioError(s.source, f"jobs[{i}].queue",
                                f"{_show(job.queue)} is a department (it has queues below it); "
                                "submit the job to one of its queues")


def _check_placements(s: Scenario) -> None:
    """Running jobs name real nodes, one per replica, and fit where they run."""
    nodes = {n.name: n for n in s.nodes}
    for i, n in enumerate(s.nodes):
        for k, g in enumerate(n.unhealthy_gpus):
            if g >= n.gpus:
                raise ScenarioError(s.source, f"nodes[{i}].unhealthy_gpus[{k}]",
                                    f"must be below the node's {n.gpus} GPUs, got {g}")
    load: dict[str, dict[str, float]] = {n: {"gpus": 0.0, "cpu": 0.0, "memory_gib": 0.0} for n in nodes}
    per_gpu: dict[tuple[str, int], float] = {}
    for i, job in enumerate(s.jobs):
        path = f"jobs[{i}]"
        if len(job.running) > job.replicas:
            raise ScenarioError(s.source, f"{path}.running",
                                f"names {len(job.running)} nodes but the job has {job.replicas} replicas")
        if job.running and len(job.running) < job.replicas:
            raise ScenarioError(s.source, f"{path}.running",
                                f"a gang runs all {job.replicas} replicas or none, got {len(job.running)} nodes")
        if job.gpu_indices is not None and len(job.gpu_indices) != len(job.running):
            raise ScenarioError(s.source, f"{path}.gpu_indices",
                                f"must have one entry per running replica ({len(job.running)}), "
                                f"got {len(job.gpu_indices)}")
        for r, node_name in enumerate(job.running):
            if node_name not in nodes:
                raise ScenarioError(s.source, f"{path}.running[{r}]", f"unknown node {_show(node_name)}")
            node = nodes[node_name]
            load[node_name]["gpus"] += job.gpus
            load[node_name]["cpu"] += job.cpu or 0
            load[node_name]["memory_gib"] += job.memory_gib or 0
            if job.gpu_indices is not None:
                _check_indices(s, f"{path}.gpu_indices[{r}]", job, node, job.gpu_indices[r], per_gpu)
    for name, used in load.items():
        node = nodes[name]
        for resource, capacity in (("gpus", node.gpus), ("cpu", node.cpu), ("memory_gib", node.memory_gib)):
            if capacity is not None and used[resource] > capacity + 1e-9:
                culprit = next(i for i, j in enumerate(s.jobs) if name in j.running)
                raise ScenarioError(s.source, f"jobs[{culprit}].running",
                                    f"node {_show(name)} has no room: its running jobs use "
                                    f"{used[resource]:g} {resource} of {capacity:g}")


def _check_indices(s: Scenario, path: str, job: Job, node: Node, idx: list[int],
                   per_gpu: dict[tuple[str, int], float]) -> None:
    want = 1 if job.is_fractional else int(job.gpus)
    if len(idx) != want or len(set(idx)) != len(idx):
        raise ScenarioError(s.source, path, f"must list {want} distinct GPU indices, got {_show(idx)}")
    for g in idx:
        if g >= node.gpus:
            raise ScenarioError(s.source, path, f"GPU {g} does not exist on {node.name} ({node.gpus} GPUs)")
        share = job.gpus if job.is_fractional else 1.0
        per_gpu[(node.name, g)] = per_gpu.get((node.name, g), 0.0) + share
        if per_gpu[(node.name, g)] > 1 + 1e-9:
            raise ScenarioError(s.source, path, f"GPU {g} of {node.name} is already fully used")


#: The queue fields of a plan that `expect.queues` may pin (numbers, or null for `limit`).
_EXPECT_QUEUE_FIELDS = ("deserved", "fair_share", "pending_demand", "allocated_before", "allocated_after", "limit")


def _mapping(s: Scenario, value: Any, path: str) -> dict:
    """An optional sub-section: absent is empty, anything but a mapping is an error."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ScenarioError(s.source, path, f"must be a mapping, got {_show(value)}")
    return value


def _check_expect(s: Scenario) -> None:
    e = s.expect
    if not _section(s, e, "expect", {"jobs", "queues", "summary"}):
        return
    jobs = {j.name for j in s.jobs}
    for name, action in _mapping(s, e.get("jobs"), "expect.jobs").items():
        if name not in jobs:
            raise ScenarioError(s.source, f"expect.jobs.{name}", "names no job of the scenario")
        if action not in ACTIONS:
            raise ScenarioError(s.source, f"expect.jobs.{name}", f"must be one of {', '.join(ACTIONS)}, got {_show(action)}")
    queues = {q.name for q in s.queues}
    for name, values in _mapping(s, e.get("queues"), "expect.queues").items():
        if name not in queues:
            raise ScenarioError(s.source, f"expect.queues.{name}", "names no queue of the scenario")
        values = _mapping(s, values, f"expect.queues.{name}")
        _no_unknown_keys(values, set(_EXPECT_QUEUE_FIELDS), f"expect.queues.{name}", s.source)
        for key, value in values.items():
            _field(s, f"expect.queues.{name}.{key}", value, _optional(_number))
    for key, value in _mapping(s, e.get("summary"), "expect.summary").items():
        _field(s, f"expect.summary.{key}", value, _number)


def _field(s: Scenario, path: str, value: Any, check: Callable[[Any], Any]) -> Any:
    try:
        return check(value)
    except _Invalid as e:
        raise ScenarioError(s.source, path, str(e)) from None


def _percent(value: Any) -> float:
    if not 0 <= _number(value) <= 100:
        raise _Invalid(f"must be a percentage from 0 to 100, got {_show(value)}")
    return value


def _series_names(value: Any) -> list[str]:
    from gpu_policy.telemetry.model import ENGINE_ACTIVE, FB_FREE, FB_USED, POWER, TEMPERATURE

    known = (ENGINE_ACTIVE, FB_FREE, FB_USED, POWER, TEMPERATURE)
    if not isinstance(value, list) or any(v not in known for v in value):
        raise _Invalid(f"must be a list of series among {', '.join(known)}, got {_show(value)}")
    return value


_PROFILE_FIELDS = {"utilization": _percent, "before": _percent, "for_s": _non_negative(_MAX_SECONDS),
                   "memory_used_mib": _non_negative(_MAX_MEMORY)}
_FAULT_FIELDS = {"node": _text, "gpu": _gpu_index, "xid": _whole_in(1, 1_000_000),
                 "xid_ago_s": _non_negative(_MAX_SECONDS), "utilization": _percent,
                 "memory_used_mib": _non_negative(_MAX_MEMORY), "unsupported": _series_names}


def _check_telemetry(s: Scenario) -> None:
    """The optional `telemetry:` section: per-job utilisation profiles and per-GPU faults."""
    t = s.telemetry
    if not _section(s, t, "telemetry", {"memory_mib", "jobs", "gpus"}):
        return
    _checked_fields({k: v for k, v in t.items() if k == "memory_mib"}, {"memory_mib": _positive(_MAX_MEMORY)}, (),
                    "telemetry", s.source)
    running = {j.name for j in s.jobs if j.is_running}
    for name, profile in _mapping(s, t.get("jobs"), "telemetry.jobs").items():
        if name not in running:
            raise ScenarioError(s.source, f"telemetry.jobs.{name}", "names no running job of the scenario")
        _checked_fields(profile, _PROFILE_FIELDS, (), f"telemetry.jobs.{name}", s.source)
    faults = t.get("gpus")
    if faults is None:
        faults = []
    if not isinstance(faults, list):
        raise ScenarioError(s.source, "telemetry.gpus", f"must be a list, got {_show(faults)}")
    nodes = {n.name: n for n in s.nodes}
    for i, fault in enumerate(faults):
        path = f"telemetry.gpus[{i}]"
        _checked_fields(fault, _FAULT_FIELDS, ("node", "gpu"), path, s.source)
        if fault["node"] not in nodes:
            raise ScenarioError(s.source, f"{path}.node", f"unknown node {_show(fault['node'])}")
        if fault["gpu"] >= nodes[fault["node"]].gpus:
            raise ScenarioError(s.source, f"{path}.gpu",
                                f"GPU {fault['gpu']} does not exist on {fault['node']} ({nodes[fault['node']].gpus} GPUs)")


def scenario_to_dict(s: Scenario) -> dict:
    """The scenario as a mapping that `parse_scenario` reads back unchanged."""
    def plain(obj, skip_defaults: bool) -> dict:
        out = {}
        for f in fields(obj):
            value = getattr(obj, f.name)
            if skip_defaults and f.name != "name" and value in (None, [], {}):
                continue
            out[f.name] = value
        return out

    out = {
        "apiVersion": API_VERSION,
        "kind": "Scenario",
        "nodes": [plain(n, True) for n in s.nodes],
        "queues": [plain(q, True) for q in s.queues],
        "jobs": [plain(j, True) for j in s.jobs],
    }
    if s.telemetry:
        out["telemetry"] = s.telemetry
    return out


def dump_scenario(s: Scenario, path: str | Path) -> None:
    """Write the scenario as YAML (no `expect:`: it described the old state)."""
    Path(path).write_text(yaml.safe_dump(scenario_to_dict(s), sort_keys=False, default_flow_style=None))
