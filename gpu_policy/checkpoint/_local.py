"""Crash-safe writes on a local or mounted disk: a private temporary file, fsync, rename."""

from __future__ import annotations

import errno
import os
import secrets
from typing import Callable

_CHUNK = 1 << 20


def temp_path(path: str) -> str:
    """A temporary name beside `path` that no other process can predict."""
    return f"{path}.tmp-{secrets.token_hex(8)}"


def open_new(path: str) -> int:
    """Create `path` for writing; fails if it exists or is a symbolic link (no planted file
    or link can redirect the write)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)


def write_temp(path: str, data: bytes, after_chunk: Callable[[], None] | None = None) -> str:
    """Write `data` to a new temporary file beside `path`, fsynced; return its name."""
    tmp = temp_path(path)
    fd = open_new(tmp)
    try:
        view = memoryview(data)
        for start in range(0, len(data), _CHUNK):
            chunk = view[start:start + _CHUNK]
            while chunk:
                written = os.write(fd, chunk)
                if written == 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                chunk = chunk[written:]
            if after_chunk:
                after_chunk()
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def write_local_atomic(path: str, data: bytes, after_chunk: Callable[[], None] | None = None) -> None:
    """Temp file in the same folder, fsync, os.replace, fsync the folder: a crash leaves
    the old file or the new one, never half of one."""
    os.replace(write_temp(path, data, after_chunk), path)
    fsync_dir(os.path.dirname(path))


def create_exclusive(path: str, data: bytes) -> None:
    """Publish `data` at `path` whole, only if nothing is there (FileExistsError otherwise):
    written to a private temp file, then hard-linked into place, which is atomic."""
    tmp = write_temp(path, data)
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)
    fsync_dir(os.path.dirname(path))


def fsync_dir(folder: str) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
