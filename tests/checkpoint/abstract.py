"""What every CheckpointStore backend must do; each backend's test file subclasses
`StoreConformance` and supplies the `store_url` fixture."""

import pytest

from gpu_policy.checkpoint import CheckpointError, CheckpointStore


class StoreConformance:
    @pytest.fixture
    def store(self, store_url):
        return CheckpointStore(store_url)

    def test_empty_store_has_no_latest(self, store):
        assert store.list() == [] and store.latest() is None

    def test_round_trip_and_manifest(self, store):
        store.save(3, {"w": [1.5, 2.5]}, metadata={"run": "a"})
        info = store.latest()
        assert info.step == 3 and info.manifest["metadata"] == {"run": "a"}
        assert info.manifest["size"] > 0 and len(info.manifest["sha256"]) == 64
        assert store.load(info) == {"w": [1.5, 2.5]}

    def test_latest_is_the_highest_step(self, store):
        for step in (1, 10, 2):
            store.save(step, step)
        assert [c.step for c in store.list()] == [1, 2, 10]
        assert store.load(store.latest()) == 10

    def test_keep_last(self, store_url):
        store = CheckpointStore(store_url, keep_last=2)
        for step in range(5):
            store.save(step, step)
        assert [c.step for c in store.list()] == [3, 4]

    def test_torn_saves_are_cleaned_after_a_later_save(self, store):
        store.save(1, "one")
        store.save(2, "two")
        store.fs.rm(f"{store.list()[-1].path}/manifest.json")  # step 2 never finished
        store.save(3, "three")
        assert [c.step for c in store.list()] == [1, 3]

    def test_corrupt_newest_falls_back_and_says_so(self, store):
        store.save(1, "one")
        store.save(2, "two")
        path = f"{store.list()[-1].path}/state.bin"
        data = bytearray(store.fs.cat_file(path))
        data[-1] ^= 0xFF
        store.fs.pipe_file(path, bytes(data))
        info = store.latest()
        assert info.step == 1 and store.load(info) == "one"
        assert len(store.skipped) == 1 and "sha256 mismatch" in store.skipped[0]

    def test_missing_manifest_is_a_torn_save(self, store):
        store.save(1, "one")
        store.save(2, "two")
        store.fs.rm(f"{store.list()[-1].path}/manifest.json")
        assert store.latest().step == 1
        assert "no manifest: the save did not finish" in store.skipped[0]

    def test_truncated_data(self, store):
        store.save(1, "one")
        store.save(2, "two" * 100)
        path = f"{store.list()[-1].path}/state.bin"
        store.fs.pipe_file(path, store.fs.cat_file(path)[:10])
        assert store.latest().step == 1 and "bytes, the manifest says" in store.skipped[0]

    def test_garbage_manifest(self, store):
        store.save(1, "one")
        store.save(2, "two")
        store.fs.pipe_file(f"{store.list()[-1].path}/manifest.json", b"{not json")
        assert store.latest().step == 1 and "not valid JSON" in store.skipped[0]

    def test_load_never_returns_unverified_bytes(self, store):
        store.save(1, "one")
        info = store.list()[0]
        store.fs.pipe_file(f"{info.path}/state.bin", b"tampered")
        with pytest.raises(CheckpointError, match="cannot be loaded"):
            store.load(info)

    def test_delete(self, store):
        store.save(1, "one")
        store.save(2, "two")
        store.delete(2)
        assert [c.step for c in store.list()] == [1]

    def test_bad_step(self, store):
        with pytest.raises(CheckpointError, match="step: must be a whole number >= 0"):
            store.save(-1, "x")
