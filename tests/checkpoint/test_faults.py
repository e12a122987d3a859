"""Fault tests with real processes and real signals (issue: preemption-safe checkpointing).

(a) SIGTERM mid-run: a checkpoint is written, the exit status is 143, a restart resumes
    at the next step and ends with weights equal, bit for bit, to an uninterrupted run's;
(b) SIGKILL in the middle of a save: the previous checkpoint loads, the torn one is skipped;
(c) a store that fails on write: tests/checkpoint/test_store_memory.py (full disk);
(d) corrupt bytes in the newest checkpoint: the conformance suite and test_runner.py;
(e) 20 random kill points: the store always loads.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from gpu_policy.checkpoint import CheckpointStore

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def wait_for(predicate, timeout: float = 20.0, what: str = "the condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def cli(*args):
    return [sys.executable, "-m", "gpu_policy.cli", "train-example", *args]


def test_sigterm_mid_run_resumes_bit_for_bit(tmp_path):
    interrupted, straight = tmp_path / "interrupted", tmp_path / "straight"
    args = ["--steps", "300", "--step-seconds", "0.005", "--checkpoint-every", "0.1"]
    proc = subprocess.Popen(cli("--checkpoint-dir", str(interrupted), *args), stdout=subprocess.PIPE, env=ENV)
    try:
        wait_for(lambda: CheckpointStore(str(interrupted)).list(), what="a first checkpoint")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143
    first = json.loads(out)
    assert first["preempted"] and first["signal"] == signal.SIGTERM and 0 < first["last_step"] < 300
    assert CheckpointStore(str(interrupted)).latest().step == first["last_step"]

    done = subprocess.run(cli("--checkpoint-dir", str(interrupted), *args), capture_output=True, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout)
    assert second["resumed_from"] == second["first_step"] == first["last_step"]  # next step, none repeated
    assert second["last_step"] == 300

    ref = subprocess.run(cli("--checkpoint-dir", str(straight), "--steps", "300"), capture_output=True, env=ENV, timeout=60)
    assert ref.returncode == 0, ref.stderr
    a, b = (CheckpointStore(str(d)) for d in (interrupted, straight))
    wa, wb = a.load(a.latest()), b.load(b.latest())
    assert wa["w"].tobytes() == wb["w"].tobytes() and wa["b"] == wb["b"]
    assert np.array_equal(wa["w"], wb["w"])


def test_sigkill_during_a_save_keeps_the_previous_checkpoint(tmp_path):
    marker = tmp_path / "saving"
    proc = subprocess.Popen([sys.executable, str(HERE / "trainer_process.py"), "--dir", str(tmp_path / "ck"),
                             "--steps", "5", "--pad-mib", "4", "--chunk-sleep", "0.5", "--slow-from", "2",
                             "--marker", str(marker)], env=ENV)
    try:
        wait_for(marker.exists, what="the slow save of step 2 to begin")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    store = CheckpointStore(str(tmp_path / "ck"))
    info = store.latest()
    assert info.step == 1
    assert store.load(info)["pad"] == bytes(4 << 20)
    assert any("step 2" in s and "no manifest" in s for s in store.skipped), store.skipped


def test_twenty_random_kill_points(tmp_path):
    rng = random.Random(20261121)
    folder = tmp_path / "ck"
    torn = 0
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, str(HERE / "trainer_process.py"), "--dir", str(folder),
                                 "--steps", "100000", "--pad-mib", "2", "--step-seconds", "0.002"], env=ENV)
        try:
            wait_for(lambda: CheckpointStore(str(folder)).list(), what="a checkpoint")
            time.sleep(rng.uniform(0.0, 0.3))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            proc.kill()
        store = CheckpointStore(str(folder))
        info = store.latest()
        assert info is not None, store.skipped
        state = store.load(info)
        assert state["pad"] == bytes(2 << 20) and state["model"]["w"].shape == (16,)
        torn += len(store.skipped)
    print(f"20 kills; torn checkpoints seen and skipped: {torn}")
