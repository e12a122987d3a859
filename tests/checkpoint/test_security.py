"""A checkpoint cannot run code by default, and a pipeline parameter cannot make the
trainer import and call a function outside the modules the deployer trusts."""

import hashlib
import json
import pickle
import subprocess

import pytest

from gpu_policy.checkpoint import CheckpointError, CheckpointStore, PickleSerializer, StateSerializer
from gpu_policy.checkpoint.budget import TRUSTED_MODULES_ENV, resolve, run_step_budget
from gpu_policy.errors import UsageError
from tests.checkpoint.test_faults import ENV, ROOT, cli


class _CreatesAFile:
    """Unpickling this calls open(path, "w"): a stand-in for any code an attacker chooses."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def plant(folder, step: int, data: bytes, serializer: str | None) -> None:
    """A checkpoint as an attacker with write access to the location would leave it: data
    and a manifest whose size and sha256 match (integrity is not origin)."""
    ckpt = folder / f"ckpt-{step:012d}"
    ckpt.mkdir(parents=True)
    (ckpt / "state.bin").write_bytes(data)
    manifest = {"format": "gpu-policy-checkpoint/v1", "step": step, "time": 0, "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(), "file": "state.bin", "metadata": {}}
    if serializer is not None:
        manifest["serializer"] = serializer
    (ckpt / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("serializer, message", [
    ("pickle", r"was written with 'pickle'; this store reads 'gpu-policy-state/v1' \(pickle runs code on load"),
    (None, r"was written with 'pickle'"),  # manifests from before the serializer was recorded
    ("gpu-policy-state/v1", r"cannot be loaded: not in the gpu-policy-state/v1 format"),  # a lying manifest
])
def test_a_malicious_pickle_does_not_run_on_resume(serializer, message, tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "ck"
    plant(folder, 5, pickle.dumps(_CreatesAFile(str(marker))), serializer)
    done = subprocess.run(cli("--checkpoint-dir", str(folder), "--steps", "10"), capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert __import__("re").search(message, done.stderr), done.stderr
    assert not marker.exists()  # the payload never ran


def test_pickle_is_an_explicit_opt_in(tmp_path):
    trusted = CheckpointStore(str(tmp_path), serializer=PickleSerializer())
    trusted.save(1, {"any": {1, 2, 3}})  # a set: the safe format has no sets
    assert trusted.load(trusted.latest()) == {"any": {1, 2, 3}}
    with pytest.raises(CheckpointError, match="a set cannot be saved in the gpu-policy-state/v1 format"):
        CheckpointStore(str(tmp_path / "safe")).save(1, {"any": {1, 2, 3}})


def test_the_safe_format_round_trips_bit_for_bit(tmp_path):
    import numpy as np

    state = {"w": np.linspace(0, 1, 7, dtype=np.float32), "b": float("nan"), "step": np.int64(3), "raw": b"\x00\xff",
             "nested": [(1, "a", None, True)], 7: {"big": 10 ** 40}, "c": np.ones((2, 2), dtype=np.complex128)}
    store = CheckpointStore(str(tmp_path))
    store.save(1, state)
    back = store.load(store.latest())
    assert back["w"].tobytes() == state["w"].tobytes() and back["w"].dtype == np.float32
    assert back["b"] != back["b"] and back["step"] == 3 and type(back["step"]) is np.int64
    assert back["raw"] == b"\x00\xff" and back["nested"] == [(1, "a", None, True)] and back[7] == {"big": 10 ** 40}
    assert np.array_equal(back["c"], state["c"])
    assert store.latest().manifest["serializer"] == StateSerializer.name


@pytest.mark.parametrize("header", [
    {"tree": {"t": "array", "dtype": "|O", "shape": [1], "blob": 0}, "blobs": [[0, 8]]},  # an object array
    {"tree": {"t": "array", "dtype": "<f8", "shape": [1000000], "blob": 0}, "blobs": [[0, 8]]},  # shape lies
    {"tree": {"t": "bytes", "blob": 0}, "blobs": [[0, 10 ** 12]]},  # beyond the data
    {"tree": {"t": "pickle", "blob": 0}, "blobs": [[0, 8]]},  # no such kind
])
def test_a_forged_state_is_refused(header, tmp_path):
    from gpu_policy.checkpoint.serializers import MAGIC, StateFormatError

    text = json.dumps(header).encode()
    data = MAGIC + len(text).to_bytes(8, "little") + text + bytes(8)
    with pytest.raises(StateFormatError):
        StateSerializer().loads(data)


def test_step_functions_only_from_trusted_modules(monkeypatch, capsys):
    monkeypatch.delenv(TRUSTED_MODULES_ENV, raising=False)
    with pytest.raises(UsageError, match=r"step_function: module 'shutil' is not under a trusted prefix \(gpu_policy\)"):
        resolve("shutil:rmtree", "step_function")
    with pytest.raises(UsageError, match=r"module 'this' is not under a trusted prefix"):
        resolve("this:x", "init_function")
    assert capsys.readouterr().out == ""  # `import this` would print the Zen: nothing was imported
    with pytest.raises(UsageError, match=r"module 'gpu_policy_evil' is not under a trusted prefix"):
        resolve("gpu_policy_evil:x", "step_function")  # a prefix means a package, not a string prefix
    monkeypatch.setenv(TRUSTED_MODULES_ENV, "tests.checkpoint")
    assert resolve("tests.checkpoint.trainer_process:main", "step_function").__name__ == "main"


def test_run_step_budget_refuses_an_untrusted_step(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUSTED_MODULES_ENV, raising=False)
    with pytest.raises(UsageError, match="not under a trusted prefix"):
        run_step_budget(str(tmp_path), 10, 5, "shutil:rmtree", "gpu_policy.checkpoint.example:initial_state")
    assert list(tmp_path.iterdir()) == []
