"""The checks of each scenario field, and the bounds they enforce (docs/scenario.md, "Limits").

A check takes a value read from the file and returns it (converted where needed), or
raises `Invalid` with the text after ``field: ``; `gpu_policy.scenario` adds the file
and the field path.
"""

from __future__ import annotations

import json
import math
import reprlib
from typing import Any, Callable

from gpu_policy.model import ComposableNode, ComposablePool, GpuSharing, Job, Node, Queue

#: Bounds on what one scenario may describe (docs/scenario.md, "Limits"): far above any
#: real cluster, low enough that no file can make the planner run out of memory.
MAX_GPUS_PER_NODE = 1024
MAX_REPLICAS = 100_000
MAX_ITEMS = {"nodes": 100_000, "queues": 2_000, "jobs": 100_000, "pools": 1_000}
MAX_CLUSTER_GPUS = 100_000
MAX_DEPARTMENT_DEPTH = 32
INT64 = (-(2 ** 63), 2 ** 63 - 1)
MAX_MEMORY = 1e9             # GiB or MiB
_MAX_GPUS_OF_QUEUE = 1e9     # deserved, limit
_MAX_CPU = 1e6               # cores
_MAX_SECONDS = 1e11          # about 3,000 years
_MAX_WEIGHT = 1e6


class Invalid(Exception):
    """Raised by a field check; carries the text after `field: `."""


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxstring, _SHOW.maxother = 2, 6, 4, 60, 60


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


def _job_gpus(value: Any) -> float:
    positive(MAX_GPUS_PER_NODE)(value)
    if value > 1 and not float(value).is_integer():
        raise Invalid(f"a fraction of a GPU must be below 1, got {show(value)}")
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


def _mig_profile(value: Any) -> str:
    """A MIG profile name as NVIDIA writes it: 1g.10gb, 3g.40gb, 1g.10gb+me."""
    if not isinstance(value, str) or not value or len(value) > 40 or not all(c.isalnum() or c in ".+-" for c in value):
        raise Invalid(f"must be a MIG profile name such as 1g.10gb, got {show(value)}")
    return value


def _mig_layout(value: Any) -> dict[str, int]:
    """A node's MIG slices: profile -> how many the node has."""
    if not isinstance(value, dict) or len(value) > 64:
        raise Invalid(f"must be a mapping of MIG profiles to slice counts, got {show(value)}")
    out = {}
    for profile, count in value.items():
        try:
            out[_mig_profile(profile)] = _whole_in(0, 8 * MAX_GPUS_PER_NODE)(count)
        except Invalid as e:
            raise Invalid(f"{profile}: {e}") from None
    return out


# field name -> check; a field missing from the mapping keeps the dataclass default
NODE_FIELDS = {
    "name": _text, "gpus": _whole_in(0, MAX_GPUS_PER_NODE), "gpu_model": optional(_text),
    "cpu": optional(_non_negative(_MAX_CPU)), "memory_gib": optional(_non_negative(MAX_MEMORY)),
    "labels": _labels, "unhealthy_gpus": _index_list, "gpu_sharing": optional(_gpu_sharing),
    "mig": _mig_layout,
}
QUEUE_FIELDS = {
    "name": _text, "parent": optional(_text), "deserved": _non_negative(_MAX_GPUS_OF_QUEUE),
    "limit": optional(_non_negative(_MAX_GPUS_OF_QUEUE)), "over_quota_weight": _non_negative(_MAX_WEIGHT),
    "priority": _priority,
}
JOB_FIELDS = {
    "name": _text, "queue": _text, "gpus": _job_gpus, "replicas": _whole_in(1, MAX_REPLICAS),
    "priority": _priority, "preemptible": optional(_boolean), "gpu_model": optional(_models),
    "cpu": optional(_non_negative(_MAX_CPU)), "memory_gib": optional(_non_negative(MAX_MEMORY)),
    "running": optional(_node_names), "gpu_indices": optional(_indices_per_replica),
    "submitted_at": _non_negative(_MAX_SECONDS), "checkpoint_age_s": optional(_non_negative(_MAX_SECONDS)),
    "mig_profile": optional(_mig_profile),
}
# the optional `composable:` section (docs/composition.md)
POOL_FIELDS = {"model": _text, "free": _whole_in(0, MAX_CLUSTER_GPUS)}
COMPOSABLE_NODE_FIELDS = {"name": _text, "max_gpus": _whole_in(0, MAX_GPUS_PER_NODE),
                          "attached": _whole_in(0, MAX_GPUS_PER_NODE)}
COMPOSABLE_FIELDS = {"attach_seconds": _non_negative(_MAX_SECONDS), "idle_detach_s": _non_negative(_MAX_SECONDS),
                     "before_preemption": _boolean}
#: `expect.compositions`: a node's net change in GPUs (+N attached, -N detached)
COMPOSITION_CHANGE = _whole_in(-MAX_GPUS_PER_NODE, MAX_GPUS_PER_NODE)
REQUIRED = {Node: ("name", "gpus"), Queue: ("name",), Job: ("name", "queue", "gpus"),
            ComposablePool: ("model", "free"), ComposableNode: ("name", "max_gpus")}


def _percent(value: Any) -> float:
    if not 0 <= number(value) <= 100:
        raise Invalid(f"must be a percentage from 0 to 100, got {show(value)}")
    return value


def _series_names(value: Any) -> list[str]:
    from gpu_policy.telemetry.model import ENGINE_ACTIVE, FB_FREE, FB_USED, POWER, TEMPERATURE

    known = (ENGINE_ACTIVE, FB_FREE, FB_USED, POWER, TEMPERATURE)
    if not isinstance(value, list) or any(v not in known for v in value):
        raise Invalid(f"must be a list of series among {', '.join(known)}, got {show(value)}")
    return value


PROFILE_FIELDS = {"utilization": _percent, "before": _percent, "for_s": _non_negative(_MAX_SECONDS),
                  "memory_used_mib": _non_negative(MAX_MEMORY)}
FAULT_FIELDS = {"node": _text, "gpu": _gpu_index, "xid": _whole_in(1, 1_000_000),
                "xid_ago_s": _non_negative(_MAX_SECONDS), "utilization": _percent,
                "memory_used_mib": _non_negative(MAX_MEMORY), "unsupported": _series_names}
