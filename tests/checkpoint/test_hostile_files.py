"""Crafted or oversized files, planted symlinks and OS errors in a checkpoint location: one
line each, bounded reads, nothing written outside the location (issue 29)."""

import errno
import json
import os

import pytest

from gpu_policy.checkpoint.lock import Unwritable

from gpu_policy.checkpoint.serializers import MAGIC, _LENGTH, StateSerializer
from gpu_policy.checkpoint.store import MANIFEST, CheckpointError, CheckpointStore


def one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def test_a_huge_manifest_is_not_read_whole(tmp_path):
    store = CheckpointStore(str(tmp_path))
    store.save(1, {"w": 1})
    with open(tmp_path / "ckpt-000000000001" / MANIFEST, "wb") as f:
        f.write(b" " * (3 << 20))
    with pytest.raises(CheckpointError) as e:
        CheckpointStore(str(tmp_path)).latest()
    assert "none is usable now" in one_line(e)


@pytest.mark.parametrize("planted,skipped", [(MANIFEST, "the manifest is larger than 1048576 bytes"),
                                             ("state.bin", "the data has more than ")])
def test_an_endless_manifest_or_state_is_read_bounded(tmp_path, planted, skipped):
    """A manifest or state file replaced by never-ending bytes is refused after its bound,
    never read whole (a full read of /dev/zero ends in MemoryError)."""
    store = CheckpointStore(str(tmp_path))
    store.save(1, {"w": 1})
    store.save(2, {"w": 2})
    target = tmp_path / "ckpt-000000000002" / planted
    target.unlink()
    os.symlink("/dev/zero", target)
    assert store.latest().step == 1
    assert skipped in store.skipped[0], store.skipped


def test_an_endless_writer_lock_is_read_bounded_and_broken(tmp_path):
    os.symlink("/dev/zero", tmp_path / "writer.lock")  # never-ending bytes: not a lock of ours
    store = CheckpointStore(str(tmp_path))
    store.save(1, {"w": 1})
    assert store.latest().step == 1


def test_a_planted_symlink_for_a_checkpoint_folder_is_refused(tmp_path):
    location, elsewhere = tmp_path / "ckpts", tmp_path / "elsewhere"
    location.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, location / "ckpt-000000000002")
    store = CheckpointStore(str(location))
    with pytest.raises(CheckpointError) as e:
        store.save(2, {"w": 2})
    assert one_line(e) == (f"{location}/ckpt-000000000002: a symlink to {elsewhere}, outside {location}: refused; "
                           "nothing was written")
    assert os.listdir(elsewhere) == []


def test_a_symlinked_checkpoint_from_elsewhere_is_skipped(tmp_path):
    location, elsewhere = tmp_path / "ckpts", tmp_path / "elsewhere"
    CheckpointStore(str(elsewhere)).save(9, {"w": "planted"})
    store = CheckpointStore(str(location))
    store.save(1, {"w": 1})
    os.symlink(elsewhere / "ckpt-000000000009", location / "ckpt-000000000009")
    assert store.latest().step == 1
    assert "a symlink to" in store.skipped[0] and "outside" in store.skipped[0]


def crafted(tree) -> bytes:
    header = json.dumps({"tree": tree, "blobs": [[0, 0]]}).encode()
    return MAGIC + _LENGTH.pack(len(header)) + header


@pytest.mark.parametrize("tree,problem", [
    ({"t": "dict", "items": [[{"t": "tuple", "items": [[1]]}, 2]]}, "a dict key of the state is not hashable"),
    ({"t": "int", "v": "²"}, "an entry of kind 'int' in the state tree is malformed"),
    ({"t": "int", "v": "--5"}, "an entry of kind 'int' in the state tree is malformed"),
    ({"t": "array", "dtype": "<f4", "shape": [0, 2 ** 62], "blob": 0}, "an array of the state has a bad dtype or shape"),
    ({"t": "array", "dtype": "<f4", "shape": [0] * 70, "blob": 0}, "an array of the state has a bad dtype or shape"),
])
def test_a_crafted_state_with_a_matching_manifest_is_one_line(tmp_path, tree, problem):
    store = CheckpointStore(str(tmp_path))
    store.save_bytes(3, crafted(tree))  # its manifest matches: size and sha256 are right
    with pytest.raises(CheckpointError) as e:
        store.load(store.latest())
    assert one_line(e).startswith(f"checkpoint of step 3 at {tmp_path}/ckpt-000000000003 cannot be loaded: {problem}")


def test_a_location_under_a_file_is_worded(tmp_path):
    """The first write (the writer lock's) says the location cannot hold checkpoints, and why."""
    (tmp_path / "file").write_text("x")
    store = CheckpointStore(str(tmp_path / "file" / "ckpts"))
    with pytest.raises(Unwritable) as e:
        store.save(1, {"w": 1})
    assert one_line(e) == f"{tmp_path}/file/ckpts: checkpoints cannot be written there (Not a directory)"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.ENOTDIR])
def test_an_os_error_on_the_store_marker_is_worded_with_its_path(tmp_path, monkeypatch, code):
    store = CheckpointStore(str(tmp_path))
    write = store._write_file

    def failing(path, data):
        if path.endswith("store.json"):
            raise OSError(code, os.strerror(code), path)
        write(path, data)

    monkeypatch.setattr(store, "_write_file", failing)
    with pytest.raises(CheckpointError) as e:
        store.save(1, {"w": 1})
    assert one_line(e) == (f"checkpoint of step 1 was saved to {tmp_path}, but the store could not be updated: "
                           f"{os.strerror(code)}: {tmp_path}/store.json")


def test_state_serializer_round_trip_still_works(tmp_path):
    store = CheckpointStore(str(tmp_path), serializer=StateSerializer())
    store.save(4, {"a": (1, 2), "b": -5})
    assert store.load(store.latest()) == {"a": (1, 2), "b": -5}
