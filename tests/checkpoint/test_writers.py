"""One writer per checkpoint location, with real processes; a full disk with keep_last;
a store whose manifests are all gone is an error, not a restart from step 0."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from gpu_policy.checkpoint import CheckpointStore, LockHeld
from gpu_policy.checkpoint._local import open_new
from gpu_policy.checkpoint.lock import LOCK_FILE, WriterLock
from tests.checkpoint.test_faults import ENV, HERE, ROOT, cli, wait_for


def trainer(folder, *args):
    return [sys.executable, str(HERE / "trainer_process.py"), "--dir", str(folder), *args]


def every_checkpoint_verifies(folder) -> list[int]:
    store = CheckpointStore(str(folder))
    steps = []
    for info in store.list():
        store._verified(info)  # raises if data and manifest disagree
        steps.append(info.step)
    return steps


def test_a_second_writer_fails_at_start_naming_the_holder(tmp_path):
    folder = tmp_path / "ck"
    first = subprocess.Popen(cli("--checkpoint-dir", str(folder), "--steps", "400", "--step-seconds", "0.01",
                                 "--checkpoint-every", "0.05"), stdout=subprocess.PIPE, env=ENV, cwd=ROOT)
    try:
        wait_for(lambda: (folder / LOCK_FILE).exists() and CheckpointStore(str(folder)).list(), what="a checkpoint")
        second = subprocess.run(cli("--checkpoint-dir", str(folder), "--steps", "400"), capture_output=True,
                                text=True, env=ENV, cwd=ROOT, timeout=120)
        out, _ = first.communicate(timeout=120)
    finally:
        first.kill()
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr.count("\n") == 1
    assert (f"is being written by another process (pid {first.pid} on host {socket.gethostname()}, last seen"
            in second.stderr)
    assert first.returncode == 0 and json.loads(out)["last_step"] == 400
    assert every_checkpoint_verifies(folder)[-1] == 400
    assert not (folder / LOCK_FILE).exists()  # released at the end


def test_two_writers_that_wait_never_lose_a_checkpoint(tmp_path):
    """Five rounds of two writers started together on one folder, the second waiting for the
    lock: afterwards every checkpoint's data matches its manifest, and the newest is the
    furthest either writer reached."""
    for round_ in range(5):
        folder = tmp_path / f"round-{round_}"
        procs = [subprocess.Popen(trainer(folder, "--steps", str(steps), "--pad-mib", "1", "--wait-for-lock", "120"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
                 for steps in (30, 40)]
        results = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], results
        steps = every_checkpoint_verifies(folder)
        assert steps[-1] == 40 and len(steps) <= 3, steps
        store = CheckpointStore(str(folder))
        assert store.load(store.latest())["pad"] == bytes(1 << 20) and not store.skipped


def test_the_second_writer_waits_then_resumes_bit_for_bit(tmp_path):
    folder, straight = tmp_path / "ck", tmp_path / "straight"
    first = subprocess.Popen(cli("--checkpoint-dir", str(folder), "--steps", "200", "--step-seconds", "0.01"),
                             stdout=subprocess.PIPE, env=ENV, cwd=ROOT)
    try:
        wait_for(lambda: (folder / LOCK_FILE).exists(), what="the first writer's lock")
        second = subprocess.run(cli("--checkpoint-dir", str(folder), "--steps", "300", "--wait-for-lock", "120"),
                                capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=180)
        first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["first_step"] == 200 and report["last_step"] == 300
    ref = subprocess.run(cli("--checkpoint-dir", str(straight), "--steps", "300"), capture_output=True, env=ENV,
                         cwd=ROOT, timeout=120)
    assert ref.returncode == 0
    a, b = CheckpointStore(str(folder)), CheckpointStore(str(straight))
    assert a.load(a.latest())["w"].tobytes() == b.load(b.latest())["w"].tobytes()


def test_a_full_disk_with_keep_last_prunes_the_oldest_and_goes_on(tmp_path):
    """The disk holds exactly keep_last=3 checkpoints: the 4th save hits ENOSPC, the oldest is
    removed and the save retried, so training goes on to the end with the newest 3."""
    folder = tmp_path / "ck"
    done = subprocess.run(trainer(folder, "--steps", "10", "--keep-last", "3", "--disk-checkpoints", "3"),
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["last_step"] == 10
    assert every_checkpoint_verifies(folder) == [8, 9, 10]
    assert "disk full while saving step 4: removing the oldest checkpoint (step 1)" in done.stderr


def test_a_disk_with_room_for_one_never_loses_the_last_good_checkpoint(tmp_path):
    folder = tmp_path / "ck"
    done = subprocess.run(trainer(folder, "--steps", "5", "--keep-last", "3", "--disk-checkpoints", "1"),
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert "checkpoint of step 2 was not saved to" in done.stderr and "No space left on device" in done.stderr
    store = CheckpointStore(str(folder))
    assert store.latest().step == 1 and store.load(store.latest())["model"]["w"].shape == (16,)


def test_every_manifest_deleted_is_an_error_not_a_restart(tmp_path):
    folder = tmp_path / "ck"
    first = subprocess.run(cli("--checkpoint-dir", str(folder), "--steps", "50", "--checkpoint-every", "0"),
                           capture_output=True, env=ENV, cwd=ROOT, timeout=120)
    assert first.returncode == 0
    for manifest in folder.glob("ckpt-*/manifest.json"):
        manifest.unlink()
    again = subprocess.run(cli("--checkpoint-dir", str(folder), "--steps", "100"), capture_output=True, text=True,
                           env=ENV, cwd=ROOT, timeout=120)
    assert again.returncode == 2 and again.stdout == ""
    assert "has saved checkpoints before, but none is usable now (3 found" in again.stderr
    assert "refusing to restart from step 0" in again.stderr


def test_a_torn_first_save_still_starts_from_zero(tmp_path):
    """No checkpoint was ever committed (a crash in the first save): a fresh start is right."""
    (tmp_path / "ckpt-000000000001").mkdir()
    (tmp_path / "ckpt-000000000001" / "state.bin").write_bytes(b"half")
    assert CheckpointStore(str(tmp_path)).latest() is None


# ---- the lock itself ------------------------------------------------------------------


def lock(folder, **kwargs):
    store = CheckpointStore(str(folder))
    return WriterLock(store.fs, store.root, str(folder), **kwargs)


def test_a_lock_left_by_a_dead_process_on_this_host_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = {"host": socket.gethostname(), "pid": int(dead.stdout), "token": "x", "renewed_at": time.time()}
    (tmp_path / LOCK_FILE).write_text(json.dumps(stale))
    mine = lock(tmp_path)
    mine.acquire()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["token"] == mine.identity["token"]


def test_a_live_holder_elsewhere_is_named_until_its_lease_lapses(tmp_path):
    now = [1000.0]
    holder = {"host": "node-7", "pid": 42, "token": "x", "renewed_at": now[0]}
    (tmp_path / LOCK_FILE).write_text(json.dumps(holder))
    waiting = lock(tmp_path, lease_s=300, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    with pytest.raises(LockHeld, match=r"being written by another process \(pid 42 on host node-7, last seen "
                                       r"15 s ago\)"):
        now[0] += 10
        waiting.acquire(wait_s=5, poll_s=1)
    now[0] += 300  # no renewal for longer than the lease: the holder is gone
    waiting.acquire()
    assert waiting.held


def test_a_writer_that_lost_its_lock_stops_before_writing(tmp_path):
    store = CheckpointStore(str(tmp_path))
    store.save(1, {"w": 1})
    (tmp_path / LOCK_FILE).write_text(json.dumps({"host": "other", "pid": 1, "token": "y", "renewed_at": time.time()}))
    with pytest.raises(LockHeld, match=r"lost its writer lock to pid 1 on host other"):
        store.save(2, {"w": 2})
    assert [c.step for c in store.list()] == [1]


def test_temp_files_refuse_planted_links(tmp_path):
    target = tmp_path / "elsewhere"
    (tmp_path / "planted").symlink_to(target)
    with pytest.raises(FileExistsError):
        open_new(str(tmp_path / "planted"))
    assert not target.exists()


def test_pruning_tolerates_what_another_process_removed(tmp_path, monkeypatch):
    store = CheckpointStore(str(tmp_path), keep_last=1)
    store.save(1, 1)
    stale_listing = store.list()
    os.rename(tmp_path / "ckpt-000000000001", tmp_path / "gone")  # another process pruned it meanwhile
    monkeypatch.setattr(store, "list", lambda: stale_listing + [type(stale_listing[0])(2, str(tmp_path / "x"))])
    store._prune(saved=2)  # no FileNotFoundError
