"""An atomic checkpoint store over fsspec URLs (docs/checkpointing.md).

Layout: ``URL/ckpt-000000000042/state.bin`` and ``manifest.json`` beside it. The
manifest (step, time, size, sha256, user metadata) is written after the data
and is the commit marker: a checkpoint without one never finished saving. On a
local disk each file is written to a temporary file in the same folder,
fsynced, renamed into place with ``os.replace`` and the folder fsynced, so a
crash leaves either the old state or the new one, never half of one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pickle
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import fsspec
from fsspec.implementations.local import LocalFileSystem

from gpu_policy.errors import GpuPolicyError

log = logging.getLogger(__name__)

FORMAT = "gpu-policy-checkpoint/v1"
DATA, MANIFEST = "state.bin", "manifest.json"
_DIR = re.compile(r"^ckpt-(\d{12})$")
_CHUNK = 1 << 20


class CheckpointError(GpuPolicyError):
    """A checkpoint could not be written or read."""


class Serializer(Protocol):
    def dumps(self, state: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class PickleSerializer:
    """The default: any picklable state (numpy arrays round-trip bit for bit)."""

    def dumps(self, state: Any) -> bytes:
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)  # noqa: S301 (the store's own, verified bytes)


@dataclass
class CheckpointInfo:
    step: int
    path: str
    manifest: dict = field(default_factory=dict)
    _data: bytes | None = field(default=None, repr=False)  # verified bytes, until loaded


class _Unusable(Exception):
    """Why a checkpoint cannot be used (torn, partial or corrupt)."""


class CheckpointStore:
    """Save, list, verify and load training checkpoints under one URL.

    ``url`` is a local path or any fsspec URL (``memory://``, ``s3://`` and
    ``gs://`` with their fsspec backend installed); ``fs`` overrides the
    filesystem fsspec would pick. ``keep_last`` keeps only the newest N
    finished checkpoints after each save (None keeps all); torn saves older
    than a successful one are removed then too. One writer per URL.
    """

    def __init__(self, url: str, keep_last: int | None = None, serializer: Serializer | None = None,
                 fs: fsspec.AbstractFileSystem | None = None):
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last: must be >= 1 or None, got {keep_last!r}")
        self.url = url
        self.keep_last = keep_last
        self.serializer = serializer or PickleSerializer()
        if fs is None:
            fs, root = fsspec.core.url_to_fs(url)
        else:
            root = fs._strip_protocol(url)
        self.fs, self.root = fs, root.rstrip("/") or "/"
        self.skipped: list[str] = []
        """Why each checkpoint passed over by the last `latest()` was not used."""

    # ---- writing -------------------------------------------------------------

    def save(self, step: int, state: Any, metadata: dict | None = None) -> CheckpointInfo:
        """Serialise `state` and save it atomically as the checkpoint of `step`."""
        return self.save_bytes(step, self.serializer.dumps(state), metadata)

    def save_bytes(self, step: int, data: bytes, metadata: dict | None = None) -> CheckpointInfo:
        if not isinstance(step, int) or step < 0:
            raise ValueError(f"step: must be a whole number >= 0, got {step!r}")
        folder = self._folder(step)
        manifest = {"format": FORMAT, "step": step, "time": time.time(), "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(), "file": DATA, "metadata": metadata or {}}
        try:
            self.fs.makedirs(folder, exist_ok=True)
            if isinstance(self.fs, LocalFileSystem):
                _fsync_dir(self.root)  # the new folder's entry is durable too
            self._write_file(f"{folder}/{DATA}", data)
            self._write_file(f"{folder}/{MANIFEST}", json.dumps(manifest, sort_keys=True).encode())
        except OSError as e:
            why = os.strerror(e.errno) if e.errno else str(e)
            raise CheckpointError(f"checkpoint of step {step} was not saved to {self.url}: {why}; "
                                  "earlier checkpoints are untouched") from e
        self._prune(saved=step)
        return CheckpointInfo(step, folder, manifest)

    def _write_file(self, path: str, data: bytes) -> None:
        if isinstance(self.fs, LocalFileSystem):
            _write_local_atomic(path, data, self._after_chunk)
        else:  # object stores: each object appears whole; the manifest goes last
            self.fs.pipe_file(path, data)

    def _after_chunk(self) -> None:
        """Called after each chunk of a local write (a hook for progress and tests)."""

    # ---- reading -------------------------------------------------------------

    def list(self) -> list[CheckpointInfo]:
        """Every checkpoint folder, oldest first, verified or not."""
        try:
            entries = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        found = []
        for entry in entries:
            match = _DIR.match(entry.rstrip("/").rsplit("/", 1)[-1])
            if match:
                found.append(CheckpointInfo(int(match.group(1)), entry.rstrip("/")))
        return sorted(found, key=lambda c: c.step)

    def latest(self) -> CheckpointInfo | None:
        """The newest checkpoint that verifies; torn or corrupt ones are skipped and reported."""
        self.skipped = []
        for info in reversed(self.list()):
            try:
                info._data = self._verified(info)
                return info
            except _Unusable as why:
                message = f"checkpoint of step {info.step} at {info.path} skipped: {why}"
                self.skipped.append(message)
                log.warning(message)
        return None

    def load(self, info: CheckpointInfo) -> Any:
        """The state of a checkpoint, never from bytes that fail verification."""
        data, info._data = info._data, None
        if data is None:
            try:
                data = self._verified(info)
            except _Unusable as why:
                raise CheckpointError(f"checkpoint of step {info.step} at {info.path} cannot be loaded: {why}") from None
        return self.serializer.loads(data)

    def delete(self, step: int) -> None:
        self.fs.rm(self._folder(step), recursive=True)

    def _verified(self, info: CheckpointInfo) -> bytes:
        """The checkpoint's data after checking it against its manifest."""
        try:
            manifest = json.loads(self._read(f"{info.path}/{MANIFEST}"))
        except FileNotFoundError:
            raise _Unusable("no manifest: the save did not finish") from None
        except (ValueError, UnicodeDecodeError):
            raise _Unusable("the manifest is not valid JSON") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("step") != info.step:
            raise _Unusable("the manifest does not describe this checkpoint")
        try:
            data = self._read(f"{info.path}/{DATA}")
        except FileNotFoundError:
            raise _Unusable("the data file is missing") from None
        if len(data) != manifest.get("size"):
            raise _Unusable(f"the data has {len(data)} bytes, the manifest says {manifest.get('size')}")
        if hashlib.sha256(data).hexdigest() != manifest.get("sha256"):
            raise _Unusable("sha256 mismatch: the data is corrupt")
        info.manifest = manifest
        return data


    def _read(self, path: str) -> bytes:
        return self.fs.cat_file(path)

    def _folder(self, step: int) -> str:
        return f"{self.root}/ckpt-{step:012d}"

    def _prune(self, saved: int) -> None:
        """After a save: drop torn saves older than it, and finished ones beyond `keep_last`.

        A finished save is one with a manifest (it is written last); telling that
        needs no read of the data, so pruning stays cheap for large checkpoints.
        """
        finished = 0
        for info in reversed(self.list()):
            done = self.fs.exists(f"{info.path}/{MANIFEST}")
            finished += done
            too_many = done and self.keep_last is not None and finished > self.keep_last
            if info.step != saved and (too_many or (not done and info.step < saved)):
                self.fs.rm(info.path, recursive=True)


def _write_local_atomic(path: str, data: bytes, after_chunk) -> None:
    """Temp file in the same folder, fsync, os.replace, fsync the folder."""
    folder = os.path.dirname(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        for start in range(0, len(data), _CHUNK):
            chunk = view[start:start + _CHUNK]
            while chunk:
                written = os.write(fd, chunk)
                if written == 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                chunk = chunk[written:]
            after_chunk()
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(folder)


def _fsync_dir(folder: str) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
