"""Queues (teams) from the `gpu-policy-queues` ConfigMap or KAI-Scheduler's Queue objects, and the
scenario's `policy:` and `topology:` from the same ConfigMap."""

from __future__ import annotations

import json

from gpu_policy.errors import ClusterObjectError, InputError, ScenarioError
from gpu_policy.kubernetes.names import POLICY_KEY, QUEUES_KEY, TOPOLOGY_KEY
from gpu_policy.model import Policy, Queue, TopologyLevel
from gpu_policy.model.safe_load import parse_text
from gpu_policy.model.scenario_file import parse_scenario

#: scenario field -> where a KAI Queue keeps it
_KAI_FIELDS = {"name": "metadata.name", "deserved": "spec.resources.gpu.quota", "limit": "spec.resources.gpu.limit",
               "over_quota_weight": "spec.resources.gpu.overQuotaWeight", "priority": "spec.priority",
               "parent": "spec.parentQueue"}


def queues_from_config_map(config_map: dict) -> list[Queue]:
    """The ConfigMap's ``queues.yaml``: a YAML list with exactly the scenario's `queues:` schema."""
    where, text = _entry(config_map, QUEUES_KEY)
    if text is None:
        raise ClusterObjectError(where, f"data.{QUEUES_KEY}", "is required: a YAML list of queues")
    items = _parsed(text, where, QUEUES_KEY)
    if not isinstance(items, list):
        raise ClusterObjectError(where, f"data.{QUEUES_KEY}", f"must be a list of queues, got {type(items).__name__}")
    return _section(items, "queues", where, QUEUES_KEY).queues


def policy_from_config_map(config_map: dict) -> Policy:
    """The ConfigMap's ``policy.yaml``: a YAML mapping with exactly the scenario's `policy:` schema
    (absent: every default)."""
    where, text = _entry(config_map, POLICY_KEY)
    if text is None:
        return Policy()
    section = _parsed(text, where, POLICY_KEY)
    if not isinstance(section, dict):
        raise ClusterObjectError(where, f"data.{POLICY_KEY}", f"must be a mapping, got {type(section).__name__}")
    return _section(section, "policy", where, POLICY_KEY).policy


def topology_from_config_map(config_map: dict) -> list[TopologyLevel] | None:
    """The ConfigMap's ``topology.yaml``: a YAML list with exactly the scenario's `topology:` schema,
    widest level first (None: absent, so the levels come from a Kueue Topology; `[]`: no levels)."""
    where, text = _entry(config_map, TOPOLOGY_KEY)
    if text is None:
        return None
    items = _parsed(text, where, TOPOLOGY_KEY)
    if not isinstance(items, list):
        raise ClusterObjectError(where, f"data.{TOPOLOGY_KEY}", f"must be a list of levels, got {type(items).__name__}")
    return _section(items, "topology", where, TOPOLOGY_KEY).topology


def _entry(config_map: dict, key: str) -> tuple[str, str | None]:
    """How messages name the ConfigMap, and the text under `key` (None: absent)."""
    meta = config_map.get("metadata") or {}
    return f"ConfigMap {meta.get('namespace')}/{meta.get('name')}", (config_map.get("data") or {}).get(key)


def _parsed(text: str, where: str, key: str):
    try:
        return parse_text(text, f"{where}: data.{key}")  # bounded: size, depth, aliases
    except InputError as e:
        raise ClusterObjectError(where, f"data.{key}", e.problem if not e.field else f"{e.field}: {e.problem}") from None


def _section(value, section: str, where: str, key: str):
    """A scenario of just this section, checked as a scenario file's is."""
    try:
        return parse_scenario({section: value}, where)
    except ScenarioError as e:
        raise ClusterObjectError(where, f"data.{key}{e.field.removeprefix(section)}", e.problem) from None


def queues_from_kai(objects: list[dict], cluster_gpus: int) -> list[Queue]:
    """KAI-Scheduler `Queue` objects (scheduling.run.ai/v2): quota -1 (unlimited) deserves
    every GPU of the cluster; limit -1 is no limit."""
    items = [_kai_queue(obj, cluster_gpus) for obj in objects]
    try:
        return parse_scenario({"queues": items}, "KAI queues").queues
    except ScenarioError as e:
        index, _, rest = e.field.removeprefix("queues[").partition("]")
        name = items[int(index)].get("name") if index.isdigit() else None
        raise ClusterObjectError(f"Queue {name}", _KAI_FIELDS.get(rest.lstrip("."), rest.lstrip(".")), e.problem) from None


def _kai_queue(obj: dict, cluster_gpus: int) -> dict:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    where = f"Queue {meta.get('name')}"
    gpu = (spec.get("resources") or {}).get("gpu") or {}

    def unlimited_or_at_least_zero(key: str, unlimited):
        value = gpu.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (value < 0 and value != -1):
            raise ClusterObjectError(where, f"spec.resources.gpu.{key}",
                                     f"must be >= 0, or -1 for unlimited, got {json.dumps(value)}")
        return unlimited if value == -1 else value

    item = {"name": meta.get("name")}
    quota = unlimited_or_at_least_zero("quota", cluster_gpus)
    if quota is not None:
        item["deserved"] = quota
    if gpu.get("limit") is not None:
        item["limit"] = unlimited_or_at_least_zero("limit", None)
    if gpu.get("overQuotaWeight") is not None:
        item["over_quota_weight"] = gpu["overQuotaWeight"]
    if spec.get("priority") is not None:
        item["priority"] = spec["priority"]
    if spec.get("parentQueue"):
        item["parent"] = spec["parentQueue"]
    return item
