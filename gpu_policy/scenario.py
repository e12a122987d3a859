"""Load, validate and write scenario files (the contract in docs/scenario.md).

Everything is checked before any solving; the first problem found raises a
`ScenarioError` whose message names the file and the field path, e.g.
``seed.yaml: jobs[3].gpus: must be > 0, got -1``.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

import yaml

from gpu_policy.errors import ScenarioError
from gpu_policy.model import Job, Node, Queue, Scenario

API_VERSION = "gpu-policy/v1alpha1"
ACTIONS = ("keep", "start", "preempt", "move", "wait")
_TOP_KEYS = {"apiVersion", "kind", "nodes", "queues", "jobs", "expect", "telemetry"}


class _Invalid(Exception):
    """Raised by a field check; carries the text after `field: `."""


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (str, list, dict)) else repr(value)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid(f"must be a number, got {_show(value)}")
    return value


def _non_negative(value: Any) -> float:
    if _number(value) < 0:
        raise _Invalid(f"must be >= 0, got {_show(value)}")
    return value


def _positive(value: Any) -> float:
    if _number(value) <= 0:
        raise _Invalid(f"must be > 0, got {_show(value)}")
    return value


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _Invalid(f"must be a whole number, got {_show(value)}")
    return value


def _non_negative_whole(value: Any) -> int:
    if _whole(value) < 0:
        raise _Invalid(f"must be >= 0, got {_show(value)}")
    return int(value)


def _positive_whole(value: Any) -> int:
    if _whole(value) < 1:
        raise _Invalid(f"must be >= 1, got {_show(value)}")
    return int(value)


def _job_gpus(value: Any) -> float:
    _positive(value)
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
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _Invalid(f"must be a mapping of label names to values, got {_show(value)}")
    return {k: str(v) for k, v in value.items()}


def _index_list(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise _Invalid(f"must be a list of GPU indices, got {_show(value)}")
    return [_non_negative_whole(v) for v in value]


def _node_names(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _Invalid(f"must be a list of node names, got {_show(value)}")
    return [_text(v) for v in value]


def _indices_per_replica(value: Any) -> list[list[int]]:
    if not isinstance(value, list):
        raise _Invalid(f"must be a list with one list of GPU indices per replica, got {_show(value)}")
    return [_index_list(v) for v in value]


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


# field name -> check; a field missing from the mapping keeps the dataclass default
_NODE_FIELDS = {
    "name": _text, "gpus": _non_negative_whole, "gpu_model": _optional(_text),
    "cpu": _optional(_non_negative), "memory_gib": _optional(_non_negative),
    "labels": _labels, "unhealthy_gpus": _index_list,
}
_QUEUE_FIELDS = {
    "name": _text, "parent": _optional(_text), "deserved": _non_negative,
    "limit": _optional(_non_negative), "over_quota_weight": _non_negative,
    "priority": _whole,
}
_JOB_FIELDS = {
    "name": _text, "queue": _text, "gpus": _job_gpus, "replicas": _positive_whole,
    "priority": _whole, "preemptible": _optional(_boolean), "gpu_model": _optional(_models),
    "cpu": _optional(_non_negative), "memory_gib": _optional(_non_negative),
    "running": _optional(_node_names), "gpu_indices": _optional(_indices_per_replica),
    "submitted_at": _non_negative, "checkpoint_age_s": _optional(_non_negative),
}
_REQUIRED = {Node: ("name", "gpus"), Queue: ("name",), Job: ("name", "queue", "gpus")}


def load_scenario(path: str | Path) -> Scenario:
    """Read a YAML or JSON scenario file and validate it."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ScenarioError(source, "", f"cannot read the file: {e.strerror}") from e
    try:
        data = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ScenarioError(source, "", f"not valid YAML or JSON{where}") from e
    return parse_scenario(data, source)


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate an already-parsed mapping and build the Scenario."""
    if not isinstance(data, dict):
        raise ScenarioError(source, "", "must be a mapping with nodes, queues and jobs")
    _no_unknown_keys(data, _TOP_KEYS, "", source)
    if data.get("apiVersion", API_VERSION) != API_VERSION:
        raise ScenarioError(source, "apiVersion", f"must be {API_VERSION}, got {_show(data['apiVersion'])}")
    if data.get("kind", "Scenario") != "Scenario":
        raise ScenarioError(source, "kind", f"must be Scenario, got {_show(data['kind'])}")
    scenario = Scenario(
        nodes=_build_all(data, "nodes", Node, _NODE_FIELDS, source),
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
    items = data.get(section) or []
    if not isinstance(items, list):
        raise ScenarioError(source, section, f"must be a list, got {_show(items)}")
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
    for i, q in enumerate(s.queues):
        seen, cur = {q.name}, q.parent
        while cur is not None:
            if cur in seen:
                raise ScenarioError(s.source, f"queues[{i}].parent", f"makes a cycle through {_show(cur)}")
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


def _check_expect(s: Scenario) -> None:
    e = s.expect
    if not _section(s, e, "expect", {"jobs", "queues", "summary"}):
        return
    jobs = {j.name for j in s.jobs}
    for name, action in (e.get("jobs") or {}).items():
        if name not in jobs:
            raise ScenarioError(s.source, f"expect.jobs.{name}", "names no job of the scenario")
        if action not in ACTIONS:
            raise ScenarioError(s.source, f"expect.jobs.{name}", f"must be one of {', '.join(ACTIONS)}, got {_show(action)}")
    queues = {q.name for q in s.queues}
    for name, values in (e.get("queues") or {}).items():
        if name not in queues:
            raise ScenarioError(s.source, f"expect.queues.{name}", "names no queue of the scenario")
        if not isinstance(values, dict):
            raise ScenarioError(s.source, f"expect.queues.{name}", f"must be a mapping, got {_show(values)}")


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


_PROFILE_FIELDS = {"utilization": _percent, "before": _percent, "for_s": _non_negative,
                   "memory_used_mib": _non_negative}
_FAULT_FIELDS = {"node": _text, "gpu": _non_negative_whole, "xid": _positive_whole, "xid_ago_s": _non_negative,
                 "utilization": _percent, "memory_used_mib": _non_negative, "unsupported": _series_names}


def _check_telemetry(s: Scenario) -> None:
    """The optional `telemetry:` section: per-job utilisation profiles and per-GPU faults."""
    t = s.telemetry
    if not _section(s, t, "telemetry", {"memory_mib", "jobs", "gpus"}):
        return
    _checked_fields({k: v for k, v in t.items() if k == "memory_mib"}, {"memory_mib": _positive}, (),
                    "telemetry", s.source)
    running = {j.name for j in s.jobs if j.is_running}
    for name, profile in (t.get("jobs") or {}).items():
        if name not in running:
            raise ScenarioError(s.source, f"telemetry.jobs.{name}", "names no running job of the scenario")
        _checked_fields(profile, _PROFILE_FIELDS, (), f"telemetry.jobs.{name}", s.source)
    faults = t.get("gpus") or []
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
