"""The trainer's side of "preemption that loses no work": run_training_steps answers gpu-policy's
checkpoint request from the pod's annotations file (rewritten here as the kubelet does), pauses,
and trains on after the withdrawal or stops on SIGTERM; nothing waits for real time."""

import logging
import signal
from datetime import datetime, timezone

import pytest

from gpu_policy.checkpoint import CheckpointPolicy, CheckpointStore, PreemptionGuard, run_training_steps
from gpu_policy.model.checkpointing import CHECKPOINT_REQUESTED, rfc3339
from tests.checkpoint.kubelet import write_volume

ASKED = datetime(2026, 1, 31, 12, 0, 0, tzinfo=timezone.utc)
NOW = datetime(2026, 1, 31, 12, 0, 5, tzinfo=timezone.utc)


class Pod:
    def __init__(self):
        self.notes = []

    def note_checkpoint(self, step, seconds, at=None):
        self.notes.append((step, seconds, at))


class World:
    """The pod's annotations file, a fake clock, and what happens while the trainer waits."""

    def __init__(self, tmp_path):
        self.folder, self.now, self.pod, self.steps, self.slept_at = tmp_path / "podinfo", [0.0], Pod(), [], []
        write_volume(self.folder, {})
        self.while_paused = []  # one action per wait

    def ask(self, when=ASKED):
        write_volume(self.folder, {CHECKPOINT_REQUESTED: rfc3339(when)})

    def withdraw(self):
        write_volume(self.folder, {})

    def sleep(self, seconds):
        self.slept_at.append(self.steps[-1] if self.steps else 0)
        self.now[0] += seconds
        self.while_paused.pop(0)()

    def guard(self, **options):
        return PreemptionGuard(grace_period_s=30, clock=lambda: self.now[0], pod_info=str(self.folder / "annotations"),
                               pod=self.pod, now=lambda: NOW, sleep=self.sleep, poll_s=2.0, **options)

    def step(self, actions=None):
        def step(state, k):
            self.steps.append(k)
            self.now[0] += 1.0
            (actions or {}).get(k, lambda: None)()
            return state + 1

        return step


def train(world, store, guard, steps=10, actions=None, **options):
    return run_training_steps(world.step(actions), 0, store, steps=steps, guard=guard, clock=lambda: world.now[0],
                              policy=CheckpointPolicy(interval_s=1e9), **options)


def test_a_request_is_answered_at_the_next_boundary_then_training_waits_for_the_withdrawal(tmp_path):
    world, store = World(tmp_path), CheckpointStore(str(tmp_path / "ck"))
    world.while_paused = [lambda: None, world.withdraw]  # asked twice, withdrawn on the third look
    summary = train(world, store, world.guard(), actions={3: world.ask})
    assert world.steps == list(range(10))  # every step once
    assert world.slept_at == [3, 3]  # after step 3 nothing trained while the request stood
    assert [(step, at) for step, _, at in world.pod.notes] == [(4, NOW), (10, NOW)]
    assert summary.checkpoint_requests == 1 and summary.seconds_paused == 4.0 and not summary.preempted
    assert [c.step for c in store.list()] == [4, 10]


def test_sigterm_while_paused_stops_with_nothing_new_to_save(tmp_path):
    world, store = World(tmp_path), CheckpointStore(str(tmp_path / "ck"))
    world.while_paused = [lambda: signal.raise_signal(signal.SIGTERM)]  # the eviction
    summary = train(world, store, world.guard(), actions={5: world.ask})
    assert summary.preempted and summary.signal == signal.SIGTERM and summary.last_step == 6
    assert summary.checkpoints_written == 1 and world.steps == list(range(6)) and len(world.pod.notes) == 1
    resumed = run_training_steps(world.step(), 0, store, steps=10, guard=PreemptionGuard(grace_period_s=30, pod=Pod()))
    assert resumed.first_step == 6 and world.steps == list(range(10))  # 0 steps lost, none repeated


def test_the_answer_reads_at_or_after_the_request_whatever_the_nodes_clock(tmp_path):
    world = World(tmp_path)
    late = datetime(2026, 1, 31, 12, 7, 0, tzinfo=timezone.utc)  # the controller's clock is ahead of ours
    world.while_paused = [world.withdraw]
    train(world, CheckpointStore(str(tmp_path / "ck")), world.guard(), steps=3, actions={0: lambda: world.ask(late)})
    assert world.pod.notes[0][2] == late and world.pod.notes[1][2] == NOW


def test_a_request_already_answered_is_not_answered_twice_and_a_newer_one_is(tmp_path):
    world, store = World(tmp_path), CheckpointStore(str(tmp_path / "ck"))
    world.while_paused = [world.withdraw, world.withdraw]
    again = datetime(2026, 1, 31, 12, 30, 0, tzinfo=timezone.utc)
    summary = train(world, store, world.guard(), actions={1: world.ask, 3: world.ask, 5: lambda: world.ask(again)})
    assert world.slept_at == [1, 5]  # the stale request at step 3 neither saved nor paused
    assert [(step, at) for step, _, at in world.pod.notes] == [(2, NOW), (6, again), (10, NOW)]
    assert summary.checkpoint_requests == 2


def test_a_request_standing_at_the_start_is_answered_without_saving_again(tmp_path):
    world, store = World(tmp_path), CheckpointStore(str(tmp_path / "ck"))
    train(world, store, PreemptionGuard(grace_period_s=30, pod=Pod()), steps=4)
    world.ask()
    world.while_paused = [world.withdraw]
    summary = train(world, store, world.guard(), steps=6)
    assert world.pod.notes[0] == (4, None, NOW)  # the resumed checkpoint answers: nothing new to save
    assert summary.first_step == 4 and summary.checkpoints_written == 1 and summary.checkpoint_requests == 1


def test_no_request_file_trains_as_before(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_POLICY_POD_INFO", str(tmp_path / "absent" / "annotations"))
    pod, log = Pod(), []
    summary = run_training_steps(lambda s, k: log.append(k) or s, 0, CheckpointStore(str(tmp_path / "ck")), steps=5,
                                 guard=PreemptionGuard(grace_period_s=30, pod=pod, sleep=pytest.fail),
                                 policy=CheckpointPolicy(interval_s=0))
    assert log == list(range(5)) and summary.checkpoints_written == 5 and [n[0] for n in pod.notes] == [1, 2, 3, 4, 5]
    assert summary.checkpoint_requests == 0 and summary.seconds_paused == 0


@pytest.mark.parametrize("annotations, raw", [({CHECKPOINT_REQUESTED: "soon"}, None), (None, b'x="unterminated')])
def test_a_bad_request_or_file_is_no_request_and_one_warning(tmp_path, caplog, annotations, raw):
    world = World(tmp_path)
    write_volume(world.folder, annotations, raw=raw)
    with caplog.at_level(logging.WARNING):
        summary = train(world, CheckpointStore(str(tmp_path / "ck")), world.guard(), steps=5)
    assert world.steps == list(range(5)) and summary.checkpoint_requests == 0
    assert len([r for r in caplog.records if "no checkpoint request" in r.message]) == 1


def test_the_guard_checks_its_settings():
    with pytest.raises(ValueError, match="poll_s: must be a finite number > 0, got 0"):
        PreemptionGuard(grace_period_s=30, poll_s=0)


def test_a_trainer_process_answers_pauses_and_is_stopped_or_released(tmp_path):
    """A real training process behind a file the test rewrites as the kubelet would; a real SIGTERM."""
    import json
    import subprocess
    import sys

    from tests.checkpoint.test_faults import ENV, HERE, wait_for

    def start(name):
        world, notes = World(tmp_path / name), tmp_path / name / "notes.jsonl"
        world.ask()  # standing before the first step: answered with the checkpoint of step 0
        proc = subprocess.Popen([sys.executable, str(HERE / "trainer_process.py"), "--dir", str(tmp_path / name / "ck"),
                                 "--steps", "50", "--step-seconds", "0.002", "--checkpoint-every", "1e6",
                                 "--notes", str(notes)], stdout=subprocess.PIPE,
                                env={**ENV, "GPU_POLICY_POD_INFO": str(world.folder / "annotations")})
        # a whole line: FileNotes' open(..., "a") makes the file before its line is written, and a loaded
        # machine lets the test read it in between
        wait_for(lambda: notes.exists() and notes.read_text().endswith("\n"), timeout=60, what="the answer on the pod")
        assert datetime.fromisoformat(json.loads(notes.read_text())["at"]) >= ASKED  # at or after the request
        return world, proc, notes

    world, proc, notes = start("evicted")
    try:
        proc.send_signal(signal.SIGTERM)  # the eviction, once the trainer has answered
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    stopped = json.loads(out)
    assert proc.returncode == 0 and stopped["preempted"] and stopped["last_step"] == 0
    assert stopped["checkpoints_written"] == 1 and stopped["checkpoint_requests"] == 1  # paused at step 0
    assert [json.loads(line)["step"] for line in notes.read_text().splitlines()] == [0]

    world, proc, notes = start("released")
    try:
        world.withdraw()
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    finished = json.loads(out)
    assert proc.returncode == 0 and finished["last_step"] == 50 and finished["checkpoint_requests"] == 1
    assert [json.loads(line)["step"] for line in notes.read_text().splitlines()] == [0, 50]
