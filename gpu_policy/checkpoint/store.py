"""An atomic checkpoint store over fsspec URLs (docs/checkpointing.md).

Layout: ``URL/ckpt-000000000042/state.bin`` and ``manifest.json`` beside it. The
manifest (step, time, size, sha256, serializer, user metadata) is written after
the data and is the commit marker: a checkpoint without one never finished
saving. On a local disk each file is written to a private temporary file
(``O_EXCL | O_NOFOLLOW``, random suffix) in the same folder, fsynced, renamed
into place with ``os.replace`` and the folder fsynced, so a crash leaves either
the old state or the new one, never half of one. ``URL/store.json`` records that
the store has committed a checkpoint, so that a store whose every checkpoint
later turns out unusable is an error rather than a silent restart from step 0.
One writer at a time holds ``URL/writer.lock`` (`gpu_policy.checkpoint.lock`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from gpu_policy.checkpoint._local import fsync_dir, write_local_atomic
from gpu_policy.checkpoint.lock import DEFAULT_LEASE_S, WriterLock
from gpu_policy.checkpoint.serializers import PickleSerializer, Serializer, StateFormatError, StateSerializer
from gpu_policy.errors import GpuPolicyError, MissingExtra

log = logging.getLogger(__name__)

FORMAT = "gpu-policy-checkpoint/v1"
DATA, MANIFEST, STORE_MARKER = "state.bin", "manifest.json", "store.json"
_DIR = re.compile(r"^ckpt-(\d{12})$")
#: Stores written before the serializer was recorded used pickle.
_UNRECORDED_SERIALIZER = PickleSerializer.name
#: fsspec protocols whose backend is a gpu-policy extra.
_STORAGE_EXTRAS = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs")}


#: the most a manifest may hold (it is a few hundred bytes; more is not ours)
MAX_MANIFEST_BYTES = 1 << 20


class CheckpointError(GpuPolicyError):
    """A checkpoint could not be written or read."""


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
    ``gs://`` with their extras installed); ``fs`` overrides the filesystem
    fsspec would pick. ``keep_last`` keeps only the newest N finished
    checkpoints after each save (None keeps all); torn saves older than a
    successful one are removed then too. ``serializer`` defaults to
    `StateSerializer`, which cannot run code on load; `PickleSerializer` is an
    opt-in for trusted locations. One writer per URL: the first save (or
    `acquire`) takes the writer lock, waiting up to ``lock_wait_s`` seconds.
    """

    def __init__(self, url: str, keep_last: int | None = None, serializer: Serializer | None = None,
                 fs: fsspec.AbstractFileSystem | None = None, lock_wait_s: float = 0.0,
                 lease_s: float = DEFAULT_LEASE_S):
        if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1):
            raise CheckpointError(f"keep_last: must be a whole number >= 1 or None, got {keep_last!r}")
        self.url = url
        self.keep_last = keep_last
        self.serializer = serializer or StateSerializer()
        if fs is None:
            fs, root = _filesystem(url)
        else:
            root = fs._strip_protocol(url)
        self.fs, self.root = fs, root.rstrip("/") or "/"
        self.lock = WriterLock(self.fs, self.root, url, lease_s)
        self.lock_wait_s = lock_wait_s
        self.skipped: list[str] = []
        """Why each checkpoint passed over by the last `latest()` was not used."""

    def acquire(self) -> None:
        """Become this URL's one writer (`LockHeld` names the current one)."""
        self.lock.acquire(self.lock_wait_s)

    def release(self) -> None:
        self.lock.release()

    # ---- writing -------------------------------------------------------------

    def save(self, step: int, state: Any, metadata: dict | None = None) -> CheckpointInfo:
        """Serialise `state` and save it atomically as the checkpoint of `step`."""
        try:
            data = self.serializer.dumps(state)
        except StateFormatError as e:
            raise CheckpointError(f"checkpoint of step {step} was not saved: {e}") from None
        return self.save_bytes(step, data, metadata)

    def save_bytes(self, step: int, data: bytes, metadata: dict | None = None) -> CheckpointInfo:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(f"step: must be a whole number >= 0, got {step!r}")
        try:
            self.acquire()
            self.lock.renew()  # still ours: never interleave with another writer
        except OSError as e:
            raise self._not_saved(step, e) from e
        folder = self._folder(step)
        manifest = {"format": FORMAT, "step": step, "time": time.time(), "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(), "file": DATA,
                    "serializer": self.serializer.name, "metadata": metadata or {}}
        try:
            self._write_checkpoint(folder, data, manifest)
        except OSError as e:
            if e.errno != errno.ENOSPC or not self._free_room(step):
                raise self._not_saved(step, e) from e
            try:  # the oldest kept checkpoint is gone: one more try
                self._write_checkpoint(folder, data, manifest)
            except OSError as again:
                raise self._not_saved(step, again) from again
        try:
            self._mark_committed(step)
            self._prune(saved=step)
        except OSError as e:
            raise CheckpointError(f"checkpoint of step {step} was saved to {self.url}, but the store could not be "
                                  f"updated: {_worded(e)}") from None
        return CheckpointInfo(step, folder, manifest)

    def _write_checkpoint(self, folder: str, data: bytes, manifest: dict) -> None:
        self.fs.makedirs(folder, exist_ok=True)
        if isinstance(self.fs, LocalFileSystem):
            outside = self._outside(folder)
            if outside:
                raise CheckpointError(f"{folder}: {outside}: refused; nothing was written")
            fsync_dir(self.root)  # the new folder's entry is durable too
        self._write_file(f"{folder}/{DATA}", data)
        self._write_file(f"{folder}/{MANIFEST}", json.dumps(manifest, sort_keys=True).encode())

    def _not_saved(self, step: int, e: OSError) -> CheckpointError:
        return CheckpointError(f"checkpoint of step {step} was not saved to {self.url}: {_worded(e)}; "
                               "earlier checkpoints are untouched")

    def _outside(self, path: str) -> str | None:
        """Why a local path leads out of the store's location (a planted symlink), else None."""
        real, root = os.path.realpath(path), os.path.realpath(self.root)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return None
        return f"a symlink to {real}, outside {self.url}"

    def _free_room(self, saving: int) -> bool:
        """The disk is full: remove the oldest finished checkpoint, never the last good one.
        True when one was removed (the save is then tried once more)."""
        finished = [c for c in self.list() if c.step != saving and self._finished(c)]
        if len(finished) < 2:
            return False
        log.warning("disk full while saving step %d: removing the oldest checkpoint (step %d) and retrying",
                    saving, finished[0].step)
        self._remove(finished[0].path)
        return True

    def _mark_committed(self, step: int) -> None:
        """Record once that this store holds committed checkpoints (see `latest`)."""
        marker = f"{self.root}/{STORE_MARKER}"
        if not self.fs.exists(marker):
            self._write_file(marker, json.dumps({"format": FORMAT, "first_step": step}).encode())

    def _write_file(self, path: str, data: bytes) -> None:
        if isinstance(self.fs, LocalFileSystem):
            write_local_atomic(path, data, self._after_chunk)
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
        except OSError as e:
            raise CheckpointError(f"{self.url}: the checkpoint location cannot be read: {_worded(e)}") from None
        found = []
        for entry in entries:
            match = _DIR.match(entry.rstrip("/").rsplit("/", 1)[-1])
            if match:
                found.append(CheckpointInfo(int(match.group(1)), entry.rstrip("/")))
        return sorted(found, key=lambda c: c.step)

    def latest(self) -> CheckpointInfo | None:
        """The newest checkpoint that verifies; torn or corrupt ones are skipped and reported.

        None for a new store. A store that has committed checkpoints before (its
        ``store.json``) but has none usable now raises `CheckpointError`: training
        must not silently start again from step 0.
        """
        self.skipped = []
        found = self.list()
        for info in reversed(found):
            try:
                info._data = self._verified(info)
                return info
            except _Unusable as why:
                message = f"checkpoint of step {info.step} at {info.path} skipped: {why}"
                self.skipped.append(message)
                log.warning(message)
        if self.fs.exists(f"{self.root}/{STORE_MARKER}"):
            raise CheckpointError(f"{self.url} has saved checkpoints before, but none is usable now "
                                  f"({len(found)} found, none with a valid manifest and data); refusing to "
                                  "restart from step 0: restore the checkpoints, or empty the location to start over")
        return None

    def load(self, info: CheckpointInfo) -> Any:
        """The state of a checkpoint, never from bytes that fail verification, and only with
        the serializer it was written with (a pickle checkpoint needs the pickle opt-in)."""
        data, info._data = info._data, None
        if data is None:
            try:
                data = self._verified(info)
            except _Unusable as why:
                raise CheckpointError(f"checkpoint of step {info.step} at {info.path} cannot be loaded: {why}") from None
        written_with = info.manifest.get("serializer", _UNRECORDED_SERIALIZER)
        if written_with != self.serializer.name:
            hint = (" (pickle runs code on load: pass serializer=PickleSerializer() only if no one else can "
                    "write this location)" if written_with == PickleSerializer.name else "")
            raise CheckpointError(f"checkpoint of step {info.step} at {info.path} was written with "
                                  f"{written_with!r}; this store reads {self.serializer.name!r}{hint}")
        try:
            return self.serializer.loads(data)
        except StateFormatError as e:
            raise CheckpointError(f"checkpoint of step {info.step} at {info.path} cannot be loaded: {e}") from None

    def delete(self, step: int) -> None:
        self.fs.rm(self._folder(step), recursive=True)

    def _verified(self, info: CheckpointInfo) -> bytes:
        """The checkpoint's data after checking it against its manifest."""
        outside = self._outside(info.path) if isinstance(self.fs, LocalFileSystem) else None
        if outside:
            raise _Unusable(f"it is {outside}")
        try:
            text = self._read(f"{info.path}/{MANIFEST}", MAX_MANIFEST_BYTES)
            if len(text) > MAX_MANIFEST_BYTES:
                raise _Unusable(f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes")
            manifest = json.loads(text)
        except FileNotFoundError:
            raise _Unusable("no manifest: the save did not finish") from None
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise _Unusable("the manifest is not valid JSON") from None
        except OSError as e:
            raise _Unusable(f"the manifest cannot be read: {_worded(e)}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("step") != info.step:
            raise _Unusable("the manifest does not describe this checkpoint")
        size = manifest.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise _Unusable(f"the manifest's size is not a number of bytes: {str(size)[:40]}")
        try:
            data = self._read(f"{info.path}/{DATA}", size)
        except FileNotFoundError:
            raise _Unusable("the data file is missing") from None
        except OSError as e:
            raise _Unusable(f"the data cannot be read: {_worded(e)}") from None
        if len(data) != size:
            raise _Unusable(f"the data has {'more than ' if len(data) > size else ''}{min(len(data), size)} bytes, "
                            f"the manifest says {size}")
        if hashlib.sha256(data).hexdigest() != manifest.get("sha256"):
            raise _Unusable("sha256 mismatch: the data is corrupt")
        info.manifest = manifest
        return data


    def _read(self, path: str, limit: int) -> bytes:
        """At most `limit` + 1 bytes of the file (one more tells a file larger than expected:
        a huge or endless file, e.g. a planted link to /dev/zero, is never read whole)."""
        with self.fs.open(path, "rb") as f:
            return f.read(limit + 1)

    def _folder(self, step: int) -> str:
        return f"{self.root}/ckpt-{step:012d}"

    def _finished(self, info: CheckpointInfo) -> bool:
        return self.fs.exists(f"{info.path}/{MANIFEST}")

    def _remove(self, path: str) -> None:
        """Remove a checkpoint folder; one another process removed first is fine."""
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass

    def _prune(self, saved: int) -> None:
        """After a save: drop torn saves older than it, and finished ones beyond `keep_last`.

        A finished save is one with a manifest (it is written last); telling that
        needs no read of the data, so pruning stays cheap for large checkpoints.
        """
        finished = 0
        for info in reversed(self.list()):
            done = self._finished(info)
            finished += done
            too_many = done and self.keep_last is not None and finished > self.keep_last
            if info.step != saved and (too_many or (not done and info.step < saved)):
                self._remove(info.path)


def _filesystem(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """fsspec's filesystem for `url`; a missing backend names the extra that brings it."""
    protocol = fsspec.core.split_protocol(url)[0] or "file"
    if protocol not in fsspec.available_protocols():
        raise CheckpointError(f"{url}: unknown storage protocol {protocol!r} (a local path, memory://, "
                              "s3:// or gs://)")
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError:
        module, extra = _STORAGE_EXTRAS.get(protocol, (protocol, None))
        if extra is None:
            raise CheckpointError(f"{url}: the fsspec backend for {protocol}:// is not installed") from None
        raise MissingExtra(f"checkpoints at {protocol}://", module, extra) from None


def _worded(e: OSError) -> str:
    """An OS error in words, with the path it concerns (ENOSPC, EROFS, ENOTDIR...)."""
    why = os.strerror(e.errno) if e.errno else str(e)
    return f"{why}: {e.filename}" if e.filename else why
