"""PreemptionGuard with real signals sent to this process."""

import os
import signal

import pytest

from gpu_policy.checkpoint import GRACE_ENV, PreemptionGuard


def test_sigterm_sets_the_flag_and_the_deadline():
    now = [100.0]
    with PreemptionGuard(grace_period_s=30, clock=lambda: now[0]) as guard:
        assert not guard.should_stop and guard.remaining() is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert guard.should_stop and guard.signal == signal.SIGTERM
        now[0] = 110.0
        assert guard.remaining() == pytest.approx(20.0)


def test_previous_handlers_are_restored():
    def mine(signum, frame):
        pass

    before = signal.signal(signal.SIGINT, mine)
    try:
        with PreemptionGuard(grace_period_s=5):
            assert signal.getsignal(signal.SIGINT) is not mine
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, before)


def test_grace_period_from_the_environment(monkeypatch):
    monkeypatch.setenv(GRACE_ENV, "45")
    assert PreemptionGuard().grace_period_s == 45
    with pytest.raises(ValueError, match="grace_period_s: must be a finite number > 0, got 0"):
        PreemptionGuard(grace_period_s=0)
    monkeypatch.setenv(GRACE_ENV, "nan")
    with pytest.raises(ValueError, match=r"\$GPU_POLICY_TERMINATION_GRACE_S: must be a finite number of seconds > 0, "
                                         r"got 'nan'"):
        PreemptionGuard()
