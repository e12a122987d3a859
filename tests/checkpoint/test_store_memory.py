"""The conformance suite on fsspec's memory:// (the object-store path: data, then marker)."""

import errno
import itertools

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from gpu_policy.checkpoint import CheckpointError, CheckpointStore
from tests.checkpoint.abstract import StoreConformance

_ids = itertools.count()


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    def store_url(self):
        return f"memory://ckpt-test-{next(_ids)}"


class FullDisk(MemoryFileSystem):
    """A filesystem with room for `room` checkpoint files (the small lock and marker
    files always fit); then it fails as a full disk does."""

    def __init__(self, room: int):
        super().__init__()
        self.room = room

    def pipe_file(self, path, value, **kwargs):
        if "/ckpt-" in path:
            if self.room <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.room -= 1
        return super().pipe_file(path, value, **kwargs)


def test_full_disk_is_a_clear_error_and_loses_nothing():
    url = f"memory://full-disk-{next(_ids)}"
    store = CheckpointStore(url, fs=FullDisk(room=3))  # step 1: data + manifest; step 2: data only
    store.save(1, "one")
    with pytest.raises(CheckpointError, match=r"checkpoint of step 2 was not saved to .*: No space left on device; "
                                              r"earlier checkpoints are untouched"):
        store.save(2, "two" * 1000)
    info = store.latest()
    assert info.step == 1 and store.load(info) == "one"
    assert "no manifest" in store.skipped[0]


def test_core_error_type_does_not_leak_from_storage():
    store = CheckpointStore(f"memory://leak-{next(_ids)}", fs=FullDisk(room=0))
    with pytest.raises(CheckpointError) as info:
        store.save(1, "x")
    assert isinstance(info.value.__cause__, OSError)
