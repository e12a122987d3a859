"""The conformance suite on a local directory (atomic rename + fsync path)."""

import pytest

from tests.checkpoint.abstract import StoreConformance


class TestLocalStore(StoreConformance):
    @pytest.fixture
    def store_url(self, tmp_path):
        return str(tmp_path / "ckpt")


def test_no_temporary_files_left(tmp_path):
    from gpu_policy.checkpoint import CheckpointStore

    store = CheckpointStore(str(tmp_path))
    store.save(1, b"x" * 3_000_000)
    names = sorted(p.name for p in (tmp_path / "ckpt-000000000001").iterdir())
    assert names == ["manifest.json", "state.bin"]
