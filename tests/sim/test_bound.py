"""The upper bound on any policy's allocation ratio, on streams worked out by hand."""

import pytest

from gpu_policy.sim.bound import allocation_bound


def test_big_shares_without_small_ones_leave_their_gaps():
    # four 810 shares on 4 GPUs: placing all leaves 4 x 190 free; dropping k loses 810 k
    assert allocation_bound([810] * 4, 4000, 0) == pytest.approx(1 - 760 / 4000)


def test_small_shares_fill_the_gaps():
    assert allocation_bound([810] * 4 + [190] * 4, 4000, 0) == pytest.approx(1.0)
    assert allocation_bound([810] * 4 + [190] * 2, 4000, 0) == pytest.approx(1 - 380 / 4000)


def test_dropping_a_big_share_can_be_the_lesser_loss():
    # ten 600 shares: placing all leaves 10 x 400; dropping six loses 3600, keeping four leaves 1600
    assert allocation_bound([600] * 10, 10_000, 0) == pytest.approx(1 - 2400 / 10_000)


def test_shares_of_half_a_gpu_or_less_bound_nothing():
    assert allocation_bound([500, 300, 250], 3000, 0) == 1.0
