"""The one backoff every retry loop uses (gpu_policy.backoff), on a fake clock."""

from gpu_policy.backoff import Backoff


class Clock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s

    def monotonic(self) -> float:
        return self.now


def test_waits_double_up_to_the_ceiling_and_reset():
    clock = Clock()
    b = Backoff(1.0, ceiling_s=5.0, sleep=clock.sleep, monotonic=clock.monotonic)
    for _ in range(5):
        assert b.pause()
    assert clock.sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]
    b.reset()
    assert b.wait_s() == 1.0


def test_a_wait_asked_for_replaces_the_own_one_which_doubles_all_the_same():
    b = Backoff(0.5)
    assert [b.wait_s(3.0), b.wait_s(), b.wait_s(None)] == [3.0, 1.0, 2.0]


def test_jitter_and_floor():
    draws = iter([0.0, 1.0, 0.5])
    b = Backoff(0.5, jitter=0.5, floor_s=0.4, draw=lambda: next(draws))
    assert [b.wait_s(), b.wait_s(), b.wait_s()] == [0.4, 1.5, 2.0]  # 0.25 floored; 1.0 x 1.5; 2.0 x 1
    assert Backoff(0.5, floor_s=0.5).wait_s(0.0) == 0.5  # a server asking for 0 s still waits the floor


def test_no_wait_ends_past_the_deadline():
    clock = Clock()
    b = Backoff(1.0, deadline_s=5.0, sleep=clock.sleep, monotonic=clock.monotonic)
    assert b.pause() and b.pause()  # 1 + 2 = 3 s
    assert not b.pause()  # 3 + 4 > 5: refused, nothing slept
    assert clock.sleeps == [1.0, 2.0] and clock.now == 3.0
