"""Young/Daly's interval and when a checkpoint is due."""

import math

import pytest

from gpu_policy.checkpoint import CheckpointPolicy, daly_interval, young_interval


def test_young():
    assert young_interval(10, 3600) == pytest.approx(math.sqrt(2 * 10 * 3600))


def test_daly_close_to_young_for_cheap_saves_and_capped_for_costly_ones():
    assert daly_interval(1, 86400) == pytest.approx(young_interval(1, 86400), rel=0.01)
    assert daly_interval(60, 1800) < young_interval(60, 1800) + 60
    assert daly_interval(5000, 1000) == 1000
    assert daly_interval(0, 1000) == 0


def test_riskier_work_checkpoints_more_often():
    assert daly_interval(5, 600) < daly_interval(5, 3600)


def test_due_follows_measured_save_time():
    policy = CheckpointPolicy(mean_time_to_preemption_s=3600, save_seconds=1)
    policy.start(0)
    first = policy.interval
    assert not policy.due(first - 1) and policy.due(first)
    policy.record_save(4.0, now=100)
    assert policy.interval > first and not policy.due(101)


def test_fixed_interval_and_validation():
    policy = CheckpointPolicy(interval_s=0)
    policy.start(5)
    assert policy.due(5)
    with pytest.raises(ValueError, match="mean_time_to_preemption_s: must be > 0"):
        CheckpointPolicy(mean_time_to_preemption_s=0)
