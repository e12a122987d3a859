"""Writing a scenario: the mapping `gpu_policy.model.scenario_file.parse_scenario` reads back
unchanged, and the YAML file of it."""

from __future__ import annotations

from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

import yaml

from gpu_policy.model import Policy, Scenario
from gpu_policy.model.scenario import API_VERSION


def scenario_to_dict(s: Scenario) -> dict:
    """The scenario as a mapping that `parse_scenario` reads back unchanged."""
    def plain(obj, skip_defaults: bool) -> dict:
        out = {}
        for f in fields(obj):
            value = getattr(obj, f.name)
            if skip_defaults and f.name != "name" and (value in (None, [], {}) or
                                                       (f.name in _LEFT_OUT_AT_DEFAULT and value == f.default)):
                continue
            out[f.name] = plain_data(value)
        return out

    out = {
        "apiVersion": API_VERSION,
        "kind": "Scenario",
        "nodes": [plain(n, True) for n in s.nodes],
        "queues": [plain(q, True) for q in s.queues],
        "jobs": [plain(j, True) for j in s.jobs],
    }
    if s.composable is not None:
        c = s.composable
        out["composable"] = {
            "pools": [plain(p, False) for p in c.pools],
            "nodes": [{k: v for k, v in plain(n, False).items() if k != "attached" or v} for n in c.nodes],
            "attach_seconds": c.attach_seconds, "idle_detach_s": c.idle_detach_s,
            "before_preemption": c.before_preemption,
        }
    if s.namespaces:
        out["namespaces"] = [plain(n, True) for n in s.namespaces]
    if s.telemetry:
        out["telemetry"] = s.telemetry
    if s.policy != Policy():
        out["policy"] = asdict(s.policy)
    if s.topology:
        out["topology"] = [asdict(level) for level in s.topology]
    return out


#: Fields added after 0.1.0 that a written scenario leaves out at their default, so that a
#: snapshot reads as it did before them.
_LEFT_OUT_AT_DEFAULT = {"saves_on_request", "min_runtime_s", "preemption_delay_s", "usage_gpu_h"}


def plain_data(value: Any) -> Any:
    """A field's value as plain data: dataclasses (a queue's model quotas, a job's topology) as
    mappings without their unset fields."""
    if is_dataclass(value):
        return {k: v for k, v in asdict(value).items() if v is not None}
    if isinstance(value, dict):
        return {k: plain_data(v) for k, v in value.items()}
    return value


def dump_scenario(s: Scenario, path: str | Path) -> None:
    """Write the scenario as YAML (no `expect:`: it described the old state)."""
    Path(path).write_text(yaml.safe_dump(scenario_to_dict(s), sort_keys=False, default_flow_style=None))
