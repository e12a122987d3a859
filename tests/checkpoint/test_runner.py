"""run_training_steps in-process: resume, stop conditions, no step run twice."""

import pytest

from gpu_policy.checkpoint import CheckpointPolicy, CheckpointStore, PreemptionGuard, run_training_steps


def counting_step(log):
    def step(state, k):
        log.append(k)
        return state + [k]

    return step


def test_resume_runs_each_step_once(tmp_path):
    store = CheckpointStore(str(tmp_path))
    log = []
    first = run_training_steps(counting_step(log), list, store, steps=5, policy=CheckpointPolicy(interval_s=0))
    assert (first.first_step, first.last_step, first.resumed_from) == (0, 5, None)
    second = run_training_steps(counting_step(log), list, store, steps=9)
    assert (second.first_step, second.last_step, second.resumed_from) == (5, 9, 5)
    assert log == list(range(9))
    assert store.load(store.latest()) == list(range(9))


def test_preemption_checkpoints_and_stops(tmp_path):
    store = CheckpointStore(str(tmp_path))
    guard = PreemptionGuard(grace_period_s=30)

    def step(state, k):
        if k == 3:
            guard.trigger()
        return state + 1

    summary = run_training_steps(step, 0, store, steps=100, guard=guard, policy=CheckpointPolicy(interval_s=1e9))
    assert summary.preempted and summary.last_step == 4 and summary.checkpoints_written == 1
    assert store.latest().step == 4 and store.load(store.latest()) == 4


def test_time_budget(tmp_path):
    now = [0.0]

    def step(state, k):
        now[0] += 1.0
        return state

    summary = run_training_steps(step, 0, CheckpointStore(str(tmp_path)), time_budget_s=3.5, clock=lambda: now[0])
    assert summary.last_step == 4 and summary.checkpoints_written == 1


def test_nothing_to_stop_on(tmp_path):
    with pytest.raises(ValueError, match="give steps, time_budget_s or both"):
        run_training_steps(lambda s, k: s, 0, CheckpointStore(str(tmp_path)))


def test_corrupt_latest_resumes_from_the_one_before(tmp_path):
    store = CheckpointStore(str(tmp_path))
    run_training_steps(lambda s, k: s + 1, 0, store, steps=3, policy=CheckpointPolicy(interval_s=0))
    newest = tmp_path / "ckpt-000000000003" / "state.bin"
    data = bytearray(newest.read_bytes())
    data[-2] ^= 0x01  # one flipped bit: same size, wrong sha256
    newest.write_bytes(bytes(data))
    summary = run_training_steps(lambda s, k: s + 1, 0, store, steps=5)
    assert summary.resumed_from == 2 and "sha256 mismatch" in summary.skipped_checkpoints[0]
    assert store.load(store.latest()) == 5
