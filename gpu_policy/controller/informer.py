"""LIST once per kind, then WATCH from the list's resourceVersion, one thread per kind.

Each watch is `KubeClient.watch`: the official client sends it, and its stream is read
through the bounded reader, event by event (docs/kubernetes.md says why not
`kubernetes.watch.Watch`). Around it, per kind: bookmarks only move the
resourceVersion on; a stream that ends or breaks is resumed from the last resourceVersion
seen (after a doubling pause when it broke); a `410 Gone` relists that kind alone. A
custom kind the cluster does not serve (its LIST answers 404: no KAI-Scheduler, no DRA
DeviceTaintRules) is said once and never asked again. What arrives is put on one queue,
which the controller's loop drains into its cache, so only the loop ever changes the cache.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Callable

from gpu_policy.backoff import Backoff
from gpu_policy.errors import ClusterAccessDenied, ClusterUnavailable
from gpu_policy.kubernetes.transport.answers import WatchExpired
from gpu_policy.kubernetes.transport.client import KubeClient

log = logging.getLogger(__name__)


@dataclass
class Change:
    """One thing the cache must take in: a relist (`objects` set) or one watch event."""

    kind: str
    change: str  # ADDED, MODIFIED, DELETED, or LISTED
    obj: dict | None = None
    objects: list[dict] | None = None


class Informer:
    """The watches of `kinds`; `start()` lists each (synchronously) and starts its watch."""

    def __init__(self, client: KubeClient, kinds: list[str], changes: queue.Queue, stop: threading.Event,
                 watch_timeout_s: float = 300.0, on_restart: Callable[[str], None] = lambda kind: None,
                 pause_s: float = 1.0):
        self.client, self.kinds, self.changes, self.stop = client, kinds, changes, stop
        self.watch_timeout_s, self.on_restart, self.pause_s = watch_timeout_s, on_restart, pause_s
        self.lists: dict[str, int] = {k: 0 for k in kinds}  # LISTs sent per kind (the first, and after 410s)
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        versions = {kind: self._relist(kind) for kind in self.kinds}
        for kind, version in versions.items():
            if version is None:
                continue  # the cluster does not serve it: nothing to watch
            thread = threading.Thread(target=self._watch, args=(kind, version), name=f"watch-{kind}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def join(self, timeout_s: float) -> None:
        """Wait for the watch threads (they end within a watch timeout once `stop` is set)."""
        for thread in self.threads:
            thread.join(timeout_s)

    def _relist(self, kind: str) -> str | None:
        items, version = self.client.list_kind(kind)
        self.lists[kind] += 1
        self.changes.put(Change(kind, "LISTED", objects=items))
        if items is None:
            log.info("the cluster does not serve %s: not watched (restart gpu-policy once it does)", kind)
            return None
        return version

    def _watch(self, kind: str, version: str) -> None:
        pause = Backoff(self.pause_s, ceiling_s=30.0, sleep=self.stop.wait)  # between broken watches
        while not self.stop.is_set():
            try:
                for change, obj in self.client.watch(kind, version, self.watch_timeout_s):
                    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
                    seen = meta.get("resourceVersion")
                    version = seen if isinstance(seen, str) and seen else version
                    if change in ("ADDED", "MODIFIED", "DELETED"):
                        self.changes.put(Change(kind, change, obj))
                    if self.stop.is_set():
                        return
                pause.reset()  # the server ended the watch as asked: resume at once
            except WatchExpired as e:
                log.info("%s; listing %s again", e, kind)
                self.on_restart(kind)
                relisted = self._relist_or_wait(kind, version)
                if relisted is None:
                    return  # the cluster no longer serves it
                version = relisted
            except (ClusterUnavailable, ClusterAccessDenied) as e:
                log.warning("%s; resuming from resourceVersion %s", e, version)
                self.on_restart(kind)
                pause.pause(e.retry_after if isinstance(e, ClusterUnavailable) else None)  # what a 429 asked

    def _relist_or_wait(self, kind: str, version: str) -> str | None:
        """The relisted kind's resourceVersion (None: no longer served); `version` when the LIST failed."""
        try:
            relisted = self._relist(kind)
            return None if relisted is None else relisted or version
        except (ClusterUnavailable, ClusterAccessDenied) as e:
            log.warning("%s", e)
            self.stop.wait(self.pause_s)
            return version
