"""Usage history on a live cluster (fair share over time): the ConfigMap `gpu-policy-usage` in
gpu-policy's namespace, key `usage.yaml`, a YAML mapping `{queue: {gpu_h, at}}`, `gpu_h` being
the queue's GPU-hours decayed to `at` (RFC 3339 UTC). The leader writes it
(gpu_policy.controller.usage, gpu_policy.kubernetes.write.usage); a look that counts usage (the
policy sets `usage_half_life_s`) reads it decayed to the look's time; and the leader counts what
each queue holds in its looks (`held_gpus`).

It is gpu-policy's own, read back as untrusted: through the safe loader (bounded by a
ConfigMap's 1 MiB), with the scenario's own checks of a queue's name and `usage_gpu_h`, and an
`at` no later than now (`CLOCK_SKEW_S` allowed between replicas' clocks). One that is missing or
fails a check gives an empty history and a problem naming the ConfigMap and the field, never a
stopped plan; the leader's next write replaces it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from gpu_policy.errors import ClusterObjectError, InputError
from gpu_policy.kubernetes.names import (QUEUES_CONFIGMAP, QUEUES_KEY, TERMINATING_QUEUE, UNMANAGED_QUEUE,
                                         USAGE_CONFIGMAP, USAGE_KEY)
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.model import Policy, Queue
from gpu_policy.model.checkpointing import parse_rfc3339
from gpu_policy.model.fields import QUEUE_FIELDS, Invalid, show
from gpu_policy.model.safe_load import MIB, InputLimits, parse_text
from gpu_policy.model.usage import UsageHistory

CLOCK_SKEW_S = 60.0
"""An `at` up to this far ahead of the reader's clock is read as now (no decay): a new leader's
clock may run behind the old one's, and that must not throw a week of history away."""

#: what one read may take: a ConfigMap holds at most 1 MiB
_LIMITS = InputLimits(max_bytes=MIB)
#: the usage a look carries, given the look's policy and time: each queue's GPU-hours and the
#: warnings of reading them (the leader keeps the history; a one-shot look reads the ConfigMap)
UsageLook = Callable[[Policy, float], tuple[dict[str, float], list[str]]]
#: queues that exist only in a snapshot: their jobs are no queue's usage (pods being deleted count for
#: their own queue: `Snapshot.terminating_held`)
_SNAPSHOT_ONLY = (UNMANAGED_QUEUE, TERMINATING_QUEUE)


@dataclass
class UsageRead:
    """The history a ConfigMap gives, decayed to the time of reading; `problem`: why it gives
    an empty one instead (missing, unreadable, from the future), else None; `written_at`: the
    time of its last write (None: no queue in it)."""

    history: UsageHistory
    problem: str | None = None
    written_at: float | None = None


def read_usage(config_map: dict | None, now: float, half_life_s: float | None, namespace: str) -> UsageRead:
    """The usage history `config_map` holds, each queue decayed from its `at` to `now` (None:
    the ConfigMap does not exist)."""
    where = f"ConfigMap {namespace}/{USAGE_CONFIGMAP}"
    if config_map is None:
        return UsageRead(UsageHistory(now, half_life_s),
                         f"{where} does not exist: no usage history yet (the controller writes it every minute while "
                         "GPUs are held)")
    try:
        entries = _entries(config_map, now, where)
    except ClusterObjectError as e:
        return UsageRead(UsageHistory(now, half_life_s),
                         f"{e}: planned with an empty usage history, which the leader's next write replaces")
    return UsageRead(UsageHistory.read_back(entries, now, half_life_s),
                     written_at=max((at for _, at in entries.values()), default=None))


def with_usage(queues: list[Queue], gpu_h: dict[str, float], namespace: str) -> tuple[list[Queue], list[str]]:
    """The queues with their `usage_gpu_h` from the history (to the thousandth: what a snapshot
    file holds is what was planned); a usage the queues ConfigMap gives is ignored, with a warning:
    on a cluster, usage is the history's alone."""
    warnings = [f"ConfigMap {namespace}/{QUEUES_CONFIGMAP}: data.{QUEUES_KEY}: queue {q.name}: usage_gpu_h: ignored: "
                f"on a cluster, usage is the ConfigMap {namespace}/{USAGE_CONFIGMAP}'s, which the controller keeps"
                for q in queues if q.usage_gpu_h]
    return [dataclasses.replace(q, usage_gpu_h=round(gpu_h.get(q.name, 0.0), 3)) for q in queues], warnings


def _entries(config_map: dict, now: float, where: str) -> dict[str, tuple[float, float]]:
    """queue -> (its GPU-hours, the time they are decayed to), every field checked."""
    field = f"data.{USAGE_KEY}"
    data = config_map.get("data")
    text = data.get(USAGE_KEY) if isinstance(data, dict) else None
    if not isinstance(text, str):
        raise ClusterObjectError(where, field, "is required: a YAML mapping {queue: {gpu_h, at}}")
    try:
        value = parse_text(text, f"{where}: {field}", _LIMITS)  # bounded: size, depth, aliases
    except InputError as e:
        raise ClusterObjectError(where, field, e.problem if not e.field else f"{e.field}: {e.problem}") from None
    if value is None:  # an empty document: no queue has used anything
        return {}
    if not isinstance(value, dict):
        raise ClusterObjectError(where, field, f"must be a mapping {{queue: {{gpu_h, at}}}}, got {show(value)}")
    out = {}
    for queue, entry in value.items():
        path = f"{field}.{queue}"
        _checked(QUEUE_FIELDS["name"], queue, where, path)
        if not isinstance(entry, dict) or "gpu_h" not in entry or "at" not in entry:
            raise ClusterObjectError(where, path, f"must be a mapping {{gpu_h, at}}, got {show(entry)}")
        gpu_h = _checked(QUEUE_FIELDS["usage_gpu_h"], entry["gpu_h"], where, f"{path}.gpu_h")
        try:
            at = parse_rfc3339(entry["at"], utc=True).timestamp() if isinstance(entry["at"], str) else None
        except ValueError:
            at = None
        if at is None:
            raise ClusterObjectError(where, f"{path}.at", f"must be an RFC 3339 time in UTC such as "
                                                          f"2026-01-31T12:00:00Z, got {show(entry['at'])}")
        if at > now + CLOCK_SKEW_S:
            raise ClusterObjectError(where, f"{path}.at", f"is in the future: {entry['at']} is {at - now:.0f} s "
                                                          "after this replica's clock")
        out[queue] = (gpu_h, at)
    return out


def _checked(check, value, where: str, path: str):
    """`value` by the scenario's own field check."""
    try:
        return check(value)
    except Invalid as e:
        raise ClusterObjectError(where, path, str(e)) from None


def held_gpus(snap: Snapshot) -> dict[str, float]:
    """The GPUs each queue holds in this look: its jobs' running replicas (pods bound, and
    released but not bound yet), of a job its reservation stands for the pods that hold their
    node already, and its pods being deleted (they hold their GPUs until they are gone). Pods of
    no queue hold no queue's usage."""
    held = dict(snap.terminating_held)
    for job, gpus in _holding(snap):
        held[job.queue] = held.get(job.queue, 0.0) + gpus
    return held


def held_before(snap: Snapshot, seconds: float) -> list[tuple[str, float, float]]:
    """(queue, GPUs, seconds) for what each job this look finds holding GPUs held during the
    `seconds` before it: as long as it has run, within them (a job that does not say how long,
    none of them). What a new leader counts for the time since the last write of the history."""
    out = []
    for job, gpus in _holding(snap):
        if job.running_for_s is not None and job.running_for_s > 0:
            out.append((job.queue, gpus, min(seconds, job.running_for_s)))
    return out


def _holding(snap: Snapshot):
    """(job, the GPUs it holds) of every job of a queue holding GPUs (pods being deleted are no
    job's: `Snapshot.terminating_held`)."""
    for job in snap.scenario.jobs:
        if job.queue in _SNAPSHOT_ONLY:
            continue
        replicas = len(snap.held.get(job.name, [])) if job.name in snap.reservations else len(job.running)
        if replicas:
            yield job, job.gpus * replicas
