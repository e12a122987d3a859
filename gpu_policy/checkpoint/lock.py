"""One writer per checkpoint location: a lock file naming its holder.

``URL/writer.lock`` is created exclusively (``O_CREAT | O_EXCL`` on a local or
mounted disk) and holds the writer's identity: host, process id, a random token
and when it last renewed the lock. A second writer fails at once with a message
naming the holder, or waits for it by option. A lock is stale, and is taken
over, when its holder ran on this host and its process is gone, or when it has
not been renewed for `lease_s` seconds (a holder killed on another node: the
pod that replaces a preempted one usually runs elsewhere). The holder renews
the lock at every save and checks before each save that the lock is still its
own, so two writers never interleave their checkpoints.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import time
from typing import Callable

import fsspec
from fsspec.implementations.local import LocalFileSystem

from gpu_policy.checkpoint._local import create_exclusive, write_local_atomic
from gpu_policy.errors import GpuPolicyError

LOCK_FILE = "writer.lock"
DEFAULT_LEASE_S = 300.0
_MAX_LOCK_BYTES = 64 * 1024  # a lock file holds a few hundred bytes
_GONE: dict = {}  # the lock file vanished between our attempt to create it and our read


class LockHeld(GpuPolicyError):
    """Another writer holds the checkpoint location."""


class Unwritable(GpuPolicyError):
    """The checkpoint location cannot be written: a file, no permission, a read-only filesystem."""


class WriterLock:
    """The lock of one checkpoint location; `acquire` it before writing."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, url: str, lease_s: float = DEFAULT_LEASE_S,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep):
        self.fs, self.path, self.url = fs, f"{root}/{LOCK_FILE}", url
        self.lease_s = lease_s
        self._clock, self._sleep = clock, sleep
        self.identity = {"host": socket.gethostname(), "pid": os.getpid(), "token": secrets.token_hex(8)}
        self.held = False
        self._renewed = 0.0

    def acquire(self, wait_s: float = 0.0, poll_s: float = 1.0) -> None:
        """Take the lock, waiting up to `wait_s` seconds for its holder; `LockHeld` after that."""
        if self.held:
            return
        give_up = self._clock() + wait_s
        while True:
            holder = self._try_create()
            if holder is None:
                self.held, self._renewed = True, self._clock()
                return
            if holder is _GONE:  # released between our create and our read: try again
                continue
            if self._stale(holder):
                self._break(holder)
                continue
            if self._clock() >= give_up:
                raise LockHeld(f"{self.url} is being written by another process ({_describe(holder, self._clock())}); "
                               f"wait for it (--wait-for-lock S), or remove {self.path} if that writer is gone")
            self._sleep(min(poll_s, max(0.0, give_up - self._clock())))

    def renew(self) -> None:
        """Check the lock is still ours and record that we are alive (called at every save)."""
        holder = self._read()
        if holder is None or holder.get("token") != self.identity["token"]:
            self.held = False
            raise LockHeld(f"{self.url}: this process lost its writer lock"
                           f"{' to ' + _describe(holder, self._clock()) if holder else ''}; stopping before writing")
        self._renewed = self._clock()
        self._write({**self.identity, "renewed_at": self._renewed}, replace=True)

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        holder = self._read()
        if holder is not None and holder.get("token") == self.identity["token"]:
            _remove(self.fs, self.path)

    def _try_create(self) -> dict | None:
        """None when we created the lock; else what the current holder wrote (`_GONE` if nothing)."""
        try:
            self._write({**self.identity, "renewed_at": self._clock()}, replace=False)
            return None
        except FileExistsError:
            holder = self._read()
            return _GONE if holder is None else holder
        except OSError as e:  # the first write to the location: say once that it cannot be written
            raise Unwritable(f"{self.url}: checkpoints cannot be written there ({e.strerror or e})") from None

    def _stale(self, holder: dict) -> bool:
        renewed = holder.get("renewed_at")
        if not isinstance(renewed, (int, float)) or self._clock() - renewed > self.lease_s:
            return True
        return holder.get("host") == self.identity["host"] and not _alive(holder.get("pid"))

    def _break(self, holder: dict) -> None:
        if self._read() == holder:  # still the stale one: not a lock someone just took over
            _remove(self.fs, self.path)

    def _read(self) -> dict | None:
        try:
            with self.fs.open(self.path, "rb") as f:
                raw = f.read(_MAX_LOCK_BYTES + 1)  # bounded: a huge or endless file is not ours
            data = json.loads(raw) if len(raw) <= _MAX_LOCK_BYTES else None
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError, RecursionError):  # not our format: treated as never renewed
            return {"renewed_at": None}
        return data if isinstance(data, dict) else {"renewed_at": None}

    def _write(self, content: dict, replace: bool) -> None:
        data = json.dumps(content).encode()
        if not isinstance(self.fs, LocalFileSystem):
            if not replace and self.fs.exists(self.path):  # object stores have no exclusive create
                raise FileExistsError(errno.EEXIST, self.path)
            self.fs.pipe_file(self.path, data)
        elif replace:
            write_local_atomic(self.path, data)
        else:
            folder = os.path.dirname(self.path)
            if os.path.lexists(folder) and not os.path.isdir(folder):  # makedirs would call it FileExistsError
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder)
            self.fs.makedirs(folder, exist_ok=True)
            create_exclusive(self.path, data)


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, under another user
        return True
    return True


def _describe(holder: dict | None, now: float) -> str:
    renewed = holder.get("renewed_at")
    age = f", last seen {now - renewed:.0f} s ago" if isinstance(renewed, (int, float)) else ""
    return f"pid {holder.get('pid')} on host {holder.get('host')}{age}"


def _remove(fs: fsspec.AbstractFileSystem, path: str) -> None:
    try:
        fs.rm_file(path)
    except FileNotFoundError:
        pass


__all__ = ["DEFAULT_LEASE_S", "LOCK_FILE", "LockHeld", "WriterLock"]
