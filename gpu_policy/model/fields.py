"""The checks of each scenario field, and the bounds they enforce (docs/scenario.md, "Limits").

A check takes a value read from the file and returns it (converted where needed), or
raises `Invalid` with the text after ``field: ``; `gpu_policy.model.scenario_file` adds the file
and the field path.
"""

from __future__ import annotations

import difflib
import json
import math
import reprlib
from typing import Any, Callable

from gpu_policy.model import (ComposableNode, ComposablePool, GpuSharing, Job, JobTopology, ModelQuota, Namespace, Node,
                              Queue, TopologyLevel)
from gpu_policy.model.placement import FIELD_OPERATORS, LABEL_OPERATORS, NAME_FIELD, TAINT_EFFECTS, TOLERATION_OPERATORS
from gpu_policy.model.telemetry import ENGINE_ACTIVE, FB_FREE, FB_USED, POWER, TEMPERATURE

#: Bounds on what one scenario may describe (docs/scenario.md, "Limits"): far above any
#: real cluster, low enough that no file can make the planner run out of memory.
MAX_GPUS_PER_NODE = 1024
MAX_REPLICAS = 100_000
MAX_ITEMS = {"nodes": 100_000, "queues": 2_000, "jobs": 100_000, "pools": 1_000, "namespaces": 100_000,
             "topology": 16}  # levels of the hierarchy: as many as a Kueue Topology may have
MAX_CLUSTER_GPUS = 100_000
MAX_DEPARTMENT_DEPTH = 32
INT64 = (-(2 ** 63), 2 ** 63 - 1)
MAX_MEMORY = 1e9             # GiB or MiB
#: the smallest fraction of a GPU: the planner counts GPUs in thousandths
MIN_GPU_FRACTION = 0.001
_MAX_GPUS_OF_QUEUE = 1e9     # deserved, limit
MAX_CPU = 1e6               # cores
_MAX_SECONDS = 1e11          # about 3,000 years
_MAX_WEIGHT = 1e6
_MAX_USAGE_GPU_H = 1e12      # GPU-hours: 100,000 GPUs for over a million years


class Invalid(Exception):
    """Raised by a field check; carries the text after `field: `, and in `at` the path
    below the field where the problem is (e.g. ``[0].match_expressions[1].operator``)."""

    def __init__(self, text: str, at: str = ""):
        super().__init__(text)
        self.at = at


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxstring, _SHOW.maxother = 2, 6, 4, 60, 60


#: The longest unknown key `unknown_field` looks for a near name for.
NEAR_KEY_CHARS = 64


def unknown_field(key: Any, allowed) -> str:
    """The message for a key no field has: the nearest allowed name first, where one is close
    (a message is cut at `MESSAGE_LIMIT` characters, which a long list of fields can pass),
    then every allowed name. Only a key of a name's length is compared (bounded time)."""
    names = sorted(allowed)
    near = difflib.get_close_matches(str(key), names, n=1) if len(str(key)) <= NEAR_KEY_CHARS else []
    hint = f"did you mean {near[0]}? " if near else ""
    return f"unknown field ({hint}allowed: {', '.join(names)})"


def show(value: Any) -> str:
    """A value as a message shows it: bounded, whatever its size or depth."""
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 80 else value[:80] + "...")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10 ** 30:
        return f"a number of {len(str(abs(value))) if abs(value) < 10 ** 4000 else 'over 4000'} digits"
    return _SHOW.repr(value)


def number(value: Any) -> float:
    """An int or a finite float (ints are never converted: a 400-digit one would overflow)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise Invalid(f"must be a number, got {show(value)}")
    return value


def _at_most(high: float) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value > high:
            raise Invalid(f"must be at most {high:,.0f}, got {show(value)}")
        return value
    return check


def _non_negative(high: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if number(value) < 0:
            raise Invalid(f"must be >= 0, got {show(value)}")
        return _at_most(high)(value)
    return check


def positive(high: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if number(value) <= 0:
            raise Invalid(f"must be > 0, got {show(value)}")
        return _at_most(high)(value)
    return check


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise Invalid(f"must be a whole number, got {show(value)}")
    return value


def _whole_in(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        number = _whole(value)
        if number < low:
            raise Invalid(f"must be >= {low}, got {show(value)}")
        if number > high:
            raise Invalid(f"must be at most {high:,}, got {show(value)}")
        return number
    return check


def _priority(value: Any) -> int:
    number = _whole(value)
    if not INT64[0] <= number <= INT64[1]:
        raise Invalid(f"must be a whole number within int64, got {show(value)}")
    return number


def job_gpus(value: Any) -> float:
    """GPUs per replica: > 0, at most a node's, a fraction only below 1 (a scenario's and `step --gpus`)."""
    positive(MAX_GPUS_PER_NODE)(value)
    if value > 1 and not float(value).is_integer():
        raise Invalid(f"a fraction of a GPU must be below 1, got {show(value)}")
    if value < MIN_GPU_FRACTION:
        raise Invalid(f"a fraction of a GPU must be at least {MIN_GPU_FRACTION:g} (the planner counts thousandths), "
                      f"got {show(value)}")
    return int(value) if float(value).is_integer() else float(value)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid(f"must be a non-empty string, got {show(value)}")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"must be true or false, got {show(value)}")
    return value


def _models(value: Any) -> list[str]:
    if isinstance(value, str):
        return [_text(value)]
    if not isinstance(value, list) or not value:
        raise Invalid(f"must be a model name or a non-empty list of them, got {show(value)}")
    return [_text(v) for v in value]


def _labels(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float, bool))
                                              for k, v in value.items()):
        raise Invalid(f"must be a mapping of label names to values, got {show(value)}")
    return {k: str(v) for k, v in value.items()}


_gpu_index = _whole_in(0, MAX_GPUS_PER_NODE - 1)


def _list_of(check: Callable[[Any], Any], what: str) -> Callable[[Any], list]:
    def checked(value: Any) -> list:
        if not isinstance(value, list):
            raise Invalid(f"must be a list of {what}, got {show(value)}")
        return [check(v) for v in value]
    return checked


_index_list = _list_of(_gpu_index, "GPU indices")
_node_names = _list_of(_text, "node names")
_indices_per_replica = _list_of(_index_list, "lists of GPU indices, one per replica")


def _within(path: str, check: Callable[[Any], Any], value: Any) -> Any:
    """`check(value)`, its problem reported `path` deeper."""
    try:
        return check(value)
    except Invalid as e:
        raise Invalid(str(e), f"{path}{e.at}") from None


def _record(checks: dict[str, Callable[[Any], Any]], required: tuple[str, ...], what: str) -> Callable[[Any], dict]:
    """A mapping with only the keys of `checks`, each checked; `required` keys present."""
    def check(value: Any) -> dict:
        if not isinstance(value, dict):
            raise Invalid(f"must be a mapping ({what}), got {show(value)}")
        for key in value:
            if key not in checks:
                raise Invalid(unknown_field(key, checks), f".{key}")
        for key in required:
            if value.get(key) is None:
                raise Invalid("is required", f".{key}")
        return {k: _within(f".{k}", checks[k], v) for k, v in value.items() if v is not None}
    return check


def _items(check: Callable[[Any], Any], what: str) -> Callable[[Any], list]:
    """A list whose items each pass `check`, a problem reported at its index."""
    def checked(value: Any) -> list:
        if not isinstance(value, list):
            raise Invalid(f"must be a list of {what}, got {show(value)}")
        return [_within(f"[{i}]", check, v) for i, v in enumerate(value)]
    return checked


def _non_empty(check: Callable[[Any], list]) -> Callable[[Any], list]:
    def checked(value: Any) -> list:
        out = check(value)
        if not out:
            raise Invalid("must not be empty (omit it for no constraint)")
        return out
    return checked


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in options:
            raise Invalid(f"must be one of {', '.join(options)}, got {show(value)}")
        return value
    return check


def _label_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Invalid(f"must be a string, got {show(value)}")
    return str(value)


def _expression(operators: tuple[str, ...], key: Callable[[Any], str]) -> Callable[[Any], dict]:
    """One node-affinity expression: In/NotIn need values, Exists/DoesNotExist none, Gt/Lt one integer."""
    record = _record({"key": key, "operator": _one_of(operators),
                      "values": _list_of(_label_value, "label values")}, ("key", "operator"), "key, operator, values")

    def check(value: Any) -> dict:
        e = record(value)
        values, op = e.get("values") or [], e["operator"]
        if op in ("In", "NotIn") and not values:
            raise Invalid(f"must list at least one value for {op}", ".values")
        if op in ("Exists", "DoesNotExist") and values:
            raise Invalid(f"must be empty for {op}, got {show(values)}", ".values")
        if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise Invalid(f"must be one whole number for {op}, got {show(values)}", ".values")
        return e
    return check


def _name_field(value: Any) -> str:
    if value != NAME_FIELD:
        raise Invalid(f"must be {NAME_FIELD} (the only node field that can be matched), got {show(value)}")
    return value


_affinity_term = _record({"match_expressions": _items(_expression(LABEL_OPERATORS, _text), "expressions"),
                          "match_fields": _items(_expression(FIELD_OPERATORS, _name_field), "expressions")},
                         (), "match_expressions, match_fields")
_toleration = _record({"key": _label_value, "operator": _one_of(TOLERATION_OPERATORS), "value": _label_value,
                       "effect": _one_of(TAINT_EFFECTS)}, (), "key, operator, value, effect")


def _checked_toleration(value: Any) -> dict:
    t = _toleration(value)
    if t.get("operator") == "Exists" and t.get("value"):
        raise Invalid(f"must be empty with operator Exists, got {show(t['value'])}", ".value")
    if not t.get("key") and t.get("operator") != "Exists":
        raise Invalid("an empty key needs operator Exists (it tolerates every taint)", ".operator")
    return t


_taint = _record({"key": _text, "value": _label_value, "effect": _one_of(TAINT_EFFECTS)}, ("key", "effect"),
                 "key, value, effect")


def _namespace_selector(value: Any) -> dict:
    return _record({"matchLabels": _labels}, ("matchLabels",), "matchLabels")(value)


#: Most GPU models one queue may give quotas for.
MAX_MODEL_QUOTAS = 1000


def _model_quotas(value: Any) -> dict[str, ModelQuota]:
    """`{MODEL: {limit: N}}`: what the queue may hold of each GPU model."""
    if not isinstance(value, dict) or len(value) > MAX_MODEL_QUOTAS:
        raise Invalid(f"must be a mapping of at most {MAX_MODEL_QUOTAS:,} GPU models to {{limit: N}}, got {show(value)}")
    quota = _record({"limit": _non_negative(_MAX_GPUS_OF_QUEUE)}, ("limit",), "limit")
    return {_within(f".{model}", _text, model): ModelQuota(**_within(f".{model}", quota, q)) for model, q in value.items()}


def _job_topology(value: Any) -> JobTopology:
    """`{required: LEVEL, preferred: LEVEL}`, one of them at least (the levels are checked
    against the scenario's `topology:` once it is read)."""
    levels = _record({"required": _text, "preferred": _text}, (), "required and/or preferred")(value)
    if not levels:
        raise Invalid("must name a required level, a preferred level or both")
    return JobTopology(**levels)


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


#: how a node's GPUs may be shared (NVIDIA's device plugin `sharing` config: timeSlicing, mps)
SHARING_STRATEGIES = ("time-slicing", "mps")
MAX_SHARING_REPLICAS = 1024


def _gpu_sharing(value: Any) -> GpuSharing:
    """`{strategy, replicas}`: GPUs shared `replicas` ways by time-slicing or MPS."""
    if not isinstance(value, dict) or set(value) != {"strategy", "replicas"}:
        raise Invalid(f"must be a mapping with strategy and replicas, got {show(value)}")
    if value["strategy"] not in SHARING_STRATEGIES:
        raise Invalid(f"strategy must be one of {', '.join(SHARING_STRATEGIES)}, got {show(value['strategy'])}")
    try:
        replicas = _whole_in(2, MAX_SHARING_REPLICAS)(value["replicas"])
    except Invalid as e:
        raise Invalid(f"replicas {e}") from None
    return GpuSharing(value["strategy"], replicas)


def mig_profile_name(value: Any) -> str:
    """A MIG profile name as NVIDIA writes it: 1g.10gb, 3g.40gb, 1g.10gb+me."""
    if not isinstance(value, str) or not value or len(value) > 40 or not all(c.isalnum() or c in ".+-" for c in value):
        raise Invalid(f"must be a MIG profile name such as 1g.10gb, got {show(value)}")
    return value


def mig_layout(value: Any) -> dict[str, int]:
    """A node's MIG slices: profile -> how many the node has."""
    if not isinstance(value, dict) or len(value) > 64:
        raise Invalid(f"must be a mapping of MIG profiles to slice counts, got {show(value)}")
    out = {}
    for profile, count in value.items():
        try:
            out[mig_profile_name(profile)] = _whole_in(0, 8 * MAX_GPUS_PER_NODE)(count)
        except Invalid as e:
            raise Invalid(f"{profile}: {e}") from None
    return out


# field name -> check; a field missing from the mapping keeps the dataclass default
NODE_FIELDS = {
    "name": _text, "gpus": _whole_in(0, MAX_GPUS_PER_NODE), "gpu_model": optional(_text),
    "cpu": optional(_non_negative(MAX_CPU)), "memory_gib": optional(_non_negative(MAX_MEMORY)),
    "labels": _labels, "unhealthy_gpus": _index_list, "taints": _items(_taint, "taints"),
    "gpu_sharing": optional(_gpu_sharing), "mig": mig_layout,
}
QUEUE_FIELDS = {
    "name": _text, "parent": optional(_text), "deserved": _non_negative(_MAX_GPUS_OF_QUEUE),
    "limit": optional(_non_negative(_MAX_GPUS_OF_QUEUE)), "over_quota_weight": _non_negative(_MAX_WEIGHT),
    "priority": _priority, "namespaces": optional(_list_of(_text, "namespace names")),
    "namespace_selector": optional(_namespace_selector), "models": _model_quotas,
    "min_runtime_s": _non_negative(_MAX_SECONDS), "preemption_delay_s": _non_negative(_MAX_SECONDS),
    "usage_gpu_h": _non_negative(_MAX_USAGE_GPU_H),
}
JOB_FIELDS = {
    "name": _text, "queue": _text, "gpus": job_gpus, "replicas": _whole_in(1, MAX_REPLICAS),
    "priority": _priority, "preemptible": optional(_boolean), "gpu_model": optional(_models),
    "cpu": optional(_non_negative(MAX_CPU)), "memory_gib": optional(_non_negative(MAX_MEMORY)),
    "running": optional(_node_names), "gpu_indices": optional(_indices_per_replica),
    "submitted_at": _non_negative(_MAX_SECONDS), "checkpoint_age_s": optional(_non_negative(_MAX_SECONDS)),
    "namespace": optional(_text), "node_selector": _labels,
    "node_affinity": optional(_non_empty(_items(_affinity_term, "node-affinity terms"))),
    "tolerations": _items(_checked_toleration, "tolerations"),
    "mig_profile": optional(mig_profile_name),
    "checkpoint_every_s": optional(positive(_MAX_SECONDS)), "save_s": optional(_non_negative(_MAX_SECONDS)),
    "saves_on_request": _boolean, "running_for_s": optional(_non_negative(_MAX_SECONDS)),
    "waiting_for_s": optional(_non_negative(_MAX_SECONDS)), "topology": optional(_job_topology),
}
#: the optional `policy:` section: cluster-wide settings
POLICY_FIELDS = {"reclaim_wait_s": _non_negative(_MAX_SECONDS), "usage_half_life_s": optional(positive(_MAX_SECONDS)),
                 "usage_weight": _non_negative(_MAX_WEIGHT)}
NAMESPACE_FIELDS = {"name": _text, "labels": _labels}
#: one level of the optional `topology:` list (docs/topology.md)
TOPOLOGY_FIELDS = {"name": _text, "label": _text}
# the optional `composable:` section (docs/composition.md)
POOL_FIELDS = {"model": _text, "free": _whole_in(0, MAX_CLUSTER_GPUS)}
COMPOSABLE_NODE_FIELDS = {"name": _text, "max_gpus": _whole_in(0, MAX_GPUS_PER_NODE),
                          "attached": _whole_in(0, MAX_GPUS_PER_NODE)}
COMPOSABLE_FIELDS = {"attach_seconds": _non_negative(_MAX_SECONDS), "idle_detach_s": _non_negative(_MAX_SECONDS),
                     "before_preemption": _boolean}
#: `expect.compositions`: a node's net change in GPUs (+N attached, -N detached)
COMPOSITION_CHANGE = _whole_in(-MAX_GPUS_PER_NODE, MAX_GPUS_PER_NODE)
REQUIRED = {Node: ("name", "gpus"), Namespace: ("name",), Queue: ("name",), Job: ("name", "queue", "gpus"),
            ComposablePool: ("model", "free"), ComposableNode: ("name", "max_gpus"), TopologyLevel: ("name", "label")}


def _percent(value: Any) -> float:
    if not 0 <= number(value) <= 100:
        raise Invalid(f"must be a percentage from 0 to 100, got {show(value)}")
    return value


def _series_names(value: Any) -> list[str]:
    known = (ENGINE_ACTIVE, FB_FREE, FB_USED, POWER, TEMPERATURE)
    if not isinstance(value, list) or any(v not in known for v in value):
        raise Invalid(f"must be a list of series among {', '.join(known)}, got {show(value)}")
    return value


PROFILE_FIELDS = {"utilization": _percent, "before": _percent, "for_s": _non_negative(_MAX_SECONDS),
                  "memory_used_mib": _non_negative(MAX_MEMORY)}
FAULT_FIELDS = {"node": _text, "gpu": _gpu_index, "xid": _whole_in(1, 1_000_000),
                "xid_ago_s": _non_negative(_MAX_SECONDS), "utilization": _percent,
                "memory_used_mib": _non_negative(MAX_MEMORY), "unsupported": _series_names}
