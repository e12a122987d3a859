"""Writing one of gpu-policy's own ConfigMaps (reservations, usage history) under the planning
lease: read, change, write with the `resourceVersion` read (optimistic concurrency), and read
again (by a GET) when another writer came first."""

from __future__ import annotations

from typing import Callable

from gpu_policy.errors import ClusterBusy

_ATTEMPTS = 5


def update_config_map(client, name: str, change: Callable[[dict[str, str]], dict[str, str]], check,
                      what: str, read: Callable[[str], dict | None] | None = None) -> dict | None:
    """Write `change(data)` over the ConfigMap's data (created when it does not exist), in one
    optimistic write, read again on a conflict. `check` runs before each write (it raises when
    the planning lease was lost). `read` gives the ConfigMap for the first attempt (the
    controller's cache, so a write costs one request; default a GET). Returns the ConfigMap as it
    now is (None: it does not exist and nothing was to be written); `what` says in a message
    what was not written."""
    for attempt in range(_ATTEMPTS):
        check()
        config_map = (read if read is not None and attempt == 0 else client.read_config_map)(name)
        data = dict((config_map or {}).get("data") or {})
        new = change(data)
        if config_map is None and not new:
            return None
        if config_map is not None and new == data:
            return config_map
        written = client.create_config_map(name, new) if config_map is None else \
            client.replace_config_map(name, new, config_map["metadata"]["resourceVersion"])
        if written is not None:
            return written
    raise ClusterBusy(f"{client.where}: ConfigMap {client.settings.namespace}/{name}: another writer changed it "
                      f"{_ATTEMPTS} times in a row; {what} was not written")
