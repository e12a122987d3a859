"""WATCH: each resource's bounded event history and the chunked JSON-lines streams served from it.

A watch from `resourceVersion` N streams every event after N; one from no version (or "0")
first streams the objects there now as ADDED. N older than the kept history answers one ERROR
event carrying a 410 Status and ends, as the real server does after a compaction. Label and
field selectors apply to events: an object that starts (stops) matching arrives as ADDED
(DELETED). Streams end at `timeoutSeconds`, on `drop_watches()`, or when the server stops;
`allowWatchBookmarks=true` adds a BOOKMARK every `bookmark_interval_s` and on `send_bookmarks()`.
"""

from __future__ import annotations

import bisect
import json
import select
import time
from dataclasses import dataclass, field

from .selectors import flag, selected

#: how often an idle stream looks for a client that went away (seconds)
POLL_S = 0.25


@dataclass
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED (as stored; a watcher's selectors may turn it into another)
    old: dict | None
    new: dict | None  # for DELETED: the last state, stamped with the deletion's resourceVersion


@dataclass
class History:
    """One resource's changes, the newest `keep` of them at least (trimmed in batches)."""

    keep: int
    changes: list[Change] = field(default_factory=list)
    rvs: list[int] = field(default_factory=list)
    floor: int = 0  # a watch from below this version may have missed changes: 410

    def append(self, change: Change) -> None:
        self.changes.append(change)
        self.rvs.append(change.rv)
        if len(self.changes) > 2 * self.keep:
            drop = len(self.changes) - self.keep
            self.floor = self.rvs[drop - 1]
            del self.changes[:drop], self.rvs[:drop]

    def since(self, rv: int) -> list[Change]:
        return self.changes[bisect.bisect_right(self.rvs, rv):]

    def expire(self, now: int) -> None:
        self.changes.clear()
        self.rvs.clear()
        self.floor = now


@dataclass(eq=False)  # each stream is itself: compared by identity
class Watcher:
    """One open stream, as the server sees it."""

    key: tuple[str, str]  # (group, plural)
    namespace: str
    query: dict
    cursor: int
    bookmarks: bool
    bookmark_seq: int
    drop_seq: int
    expire_seq: int
    deadline: float | None
    next_bookmark: float | None
    abrupt: bool = False


def gone_status(rv: int, now: int) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {rv} ({now})", "reason": "Expired", "code": 410}


def at_version(body, res):
    """An answer as a request at `res.version` (a `Resource` routed at the version asked for) sees
    it: its objects of that kind, a list's items too, carry that apiVersion (the versions of one
    CRD here differ in nothing else, so the API server's conversion is the apiVersion alone)."""
    if isinstance(body, dict) and body.get("kind") == res.kind:
        return {**body, "apiVersion": res.api_version}
    if isinstance(body, dict) and isinstance(body.get("items"), list):
        return {**body, "items": [at_version(o, res) for o in body["items"]]}
    return body


def event_line(kind: str, obj: dict) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def as_seen(change: Change, namespace: str, query: dict) -> tuple[str, dict] | None:
    """The event a watcher with these selectors gets for a change, or None."""
    was, now = selected(change.old, namespace, query), selected(change.new, namespace, query)
    if change.type == "DELETED":
        return ("DELETED", change.new) if was else None
    if was and now:
        return "MODIFIED", change.new
    if now:
        return "ADDED", change.new
    if was:
        return "DELETED", change.new
    return None


def open_stream(fake, res, namespace: str, query: dict) -> tuple[Watcher | None, list[bytes]]:
    """Register a watcher (under the store's lock); return it with its first lines. No watcher
    when the first line is already the end (a 410)."""
    rv_text = query.get("resourceVersion") or "0"
    if not rv_text.isdigit():
        return None, [event_line("ERROR", {**gone_status(0, fake._version), "code": 400, "reason": "BadRequest",
                                            "message": f"invalid resource version: {rv_text!r}"})]
    history = fake._history_of(res)
    lines = []
    if rv_text == "0":
        start = fake._version
        for (g, p, _, _), obj in sorted(fake._store.items()):
            if (g, p) == (res.group, res.plural) and selected(obj, namespace, query):
                lines.append(event_line("ADDED", at_version(obj, res)))
    else:
        start = int(rv_text)
        if start < history.floor:
            return None, [event_line("ERROR", gone_status(start, fake._version))]
    timeout = query.get("timeoutSeconds")
    now = time.monotonic()
    bookmarks = flag(query, "allowWatchBookmarks")
    watcher = Watcher((res.group, res.plural), namespace, query, start, bookmarks, fake._bookmark_seq,
                      fake._drop_seq, fake._expire_seqs.get((res.group, res.plural), 0),
                      now + float(timeout) if timeout else None,
                      now + fake.bookmark_interval_s if bookmarks and fake.bookmark_interval_s else None)
    fake._watchers.append(watcher)
    fake._cond.notify_all()  # for await_watches
    return watcher, lines


def _next_lines(fake, w: Watcher, res) -> tuple[list[bytes], bool]:
    """What the watcher has to send now, and whether its stream ends after it (under the lock)."""
    history = fake._history_of(res)
    if fake._expire_seqs.get(w.key, 0) != w.expire_seq or w.cursor < history.floor:
        return [event_line("ERROR", gone_status(w.cursor, fake._version))], True
    lines = []
    for change in history.since(w.cursor):
        seen = as_seen(change, w.namespace, w.query)
        if seen:
            lines.append(event_line(seen[0], at_version(seen[1], res)))
        w.cursor = change.rv
    now = time.monotonic()
    timed_out = w.deadline is not None and now >= w.deadline
    if w.bookmarks and (fake._bookmark_seq != w.bookmark_seq or timed_out
                        or (w.next_bookmark is not None and now >= w.next_bookmark)):
        w.bookmark_seq = fake._bookmark_seq
        w.next_bookmark = now + fake.bookmark_interval_s if fake.bookmark_interval_s else None
        w.cursor = max(w.cursor, fake._version)  # nothing of this resource is newer than the store's version
        lines.append(event_line("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version,
                                             "metadata": {"resourceVersion": str(w.cursor)}}))
    if fake._drop_seq != w.drop_seq:
        w.abrupt = fake._drop_abrupt
        return lines, True
    return lines, timed_out or fake._stopping


def _wait_s(fake, w: Watcher) -> float:
    times = [t for t in (w.deadline, w.next_bookmark) if t is not None]
    return max(0.0, min([POLL_S] + [t - time.monotonic() for t in times]))


def _client_gone(sock) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, 0x2) == b""  # MSG_PEEK: the client closed its end
    except OSError:
        return True


def serve(fake, handler, res, namespace: str, query: dict, request) -> None:
    """Answer one WATCH request on the handler's connection, until the stream ends."""
    with fake._cond:
        watcher, first = open_stream(fake, res, namespace, query)
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.flush()  # the client waits for the headers before it reads any event
    handler.close_connection = True
    try:
        _send(handler, request, first)
        while watcher is not None:
            with fake._cond:
                lines, done = _next_lines(fake, watcher, res)
                if not lines and not done:
                    fake._cond.wait(_wait_s(fake, watcher))
                    lines, done = _next_lines(fake, watcher, res)
            _send(handler, request, lines)
            if done or _client_gone(handler.connection):
                break
        _forget(fake, watcher)  # before the last chunk: a client that sees the end sees no open watch
        if watcher is None or not watcher.abrupt:
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
    except OSError:
        pass  # the client went away
    finally:
        _forget(fake, watcher)


def _forget(fake, watcher: Watcher | None) -> None:
    with fake._cond:
        if watcher in fake._watchers:
            fake._watchers.remove(watcher)


def _send(handler, request, lines: list[bytes]) -> None:
    if not lines:
        return
    data = b"".join(lines)
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()
    request.bytes += len(data)

