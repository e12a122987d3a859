"""Writing the usage history (what it is and how it is read: gpu_policy.kubernetes.read.usage).
Only the leader writes it, fenced like every write; what it writes replaces whatever was
there, a ConfigMap that could not be read included."""

from __future__ import annotations

import yaml

from gpu_policy.kubernetes.clocks import stamp
from gpu_policy.kubernetes.names import USAGE_CONFIGMAP, USAGE_KEY
from gpu_policy.kubernetes.write.config_map import update_config_map
from gpu_policy.model.usage import UsageHistory


def usage_data(history: UsageHistory) -> dict[str, str]:
    """The ConfigMap's data: every queue's GPU-hours (to the millionth) decayed to the history's time."""
    at = stamp(history.at)
    entries = {queue: {"gpu_h": round(gpu_h, 6), "at": at} for queue, gpu_h in sorted(history.gpu_h.items())}
    return {USAGE_KEY: yaml.safe_dump(entries, sort_keys=False)}


def write_usage(client, history: UsageHistory, check, read=None) -> dict:
    """Replace the ConfigMap's data with `history` (created when it does not exist); `check`
    runs before each write, `read` reads it first (`update_config_map`). Returns the ConfigMap as written."""
    data = usage_data(history)
    return update_config_map(client, USAGE_CONFIGMAP, lambda _: data, check, "the usage history", read)
