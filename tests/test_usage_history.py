"""The usage history (gpu_policy.model.usage): GPUs held x time, decayed exactly with the
half-life, driven here by a clock the test moves."""

import math

import pytest

from gpu_policy.model.usage import FORGOTTEN_GPU_H, UsageHistory, decay_factor

WEEK = 604_800.0
START = 1_800_000_000.0


class Clock:
    """The time the test says; `tick` moves it and feeds the history what was held meanwhile."""

    def __init__(self, history: UsageHistory):
        self.history, self.now = history, history.at

    def tick(self, held: dict[str, float], seconds: float) -> None:
        self.now += seconds
        self.history.add(held, self.now - self.history.at)


def held_all_along(gpus: float, seconds: float, half_life_s: float) -> float:
    """The decayed GPU-hours of `gpus` held for `seconds`: the integral of 2^(-age/h), in hours."""
    return gpus * half_life_s / math.log(2) * (1 - 2 ** (-seconds / half_life_s)) / 3600


def test_gpus_held_for_a_time_are_their_decayed_integral_however_often_it_is_sampled():
    once, often = UsageHistory(START, WEEK), UsageHistory(START, WEEK)
    Clock(once).tick({"a": 8}, 3 * 86_400)
    clock = Clock(often)
    for _ in range(3 * 24 * 60):  # every minute for three days
        clock.tick({"a": 8}, 60)
    assert once.gpu_h["a"] == pytest.approx(held_all_along(8, 3 * 86_400, WEEK), rel=1e-12)
    assert often.gpu_h["a"] == pytest.approx(once.gpu_h["a"], rel=1e-9)
    assert once.at == often.at == START + 3 * 86_400


def test_a_cluster_busy_for_many_half_lives_reaches_gpus_times_half_life_over_ln_2():
    """The figure the scenario files use: 16 GPUs busy all along, a week's half-life: 3,878 GPU-hours."""
    history = UsageHistory(START, WEEK)
    Clock(history).tick({"a": 16}, 40 * WEEK)
    assert history.gpu_h["a"] == pytest.approx(16 * WEEK / math.log(2) / 3600, rel=1e-9)
    assert round(history.gpu_h["a"]) == 3878


def test_usage_halves_in_a_half_life_when_nothing_is_held():
    history = UsageHistory(START, 3600.0, {"a": 100.0, "b": 10.0})
    clock = Clock(history)
    clock.tick({}, 3600)
    assert history.gpu_h == pytest.approx({"a": 50.0, "b": 5.0})
    assert history.at_time(clock.now + 7200) == pytest.approx({"a": 12.5, "b": 1.25})
    assert history.gpu_h == pytest.approx({"a": 50.0, "b": 5.0})  # at_time only looks


def test_what_was_used_before_decays_while_new_use_adds_up():
    history = UsageHistory(START, 3600.0, {"a": 100.0})
    Clock(history).tick({"a": 2, "b": 4}, 1800)
    half = 2 ** -0.5
    assert history.gpu_h["a"] == pytest.approx(100 * half + held_all_along(2, 1800, 3600))
    assert history.gpu_h["b"] == pytest.approx(held_all_along(4, 1800, 3600))


def test_entries_read_back_are_each_decayed_from_their_own_time_and_the_future_counts_as_now():
    entries = {"a": (80.0, START - 3600), "b": (80.0, START - 7200), "c": (80.0, START + 30)}
    history = UsageHistory.read_back(entries, START, 3600.0)
    assert history.at == START and history.gpu_h == pytest.approx({"a": 40.0, "b": 20.0, "c": 80.0})


def test_without_a_half_life_nothing_decays_and_nothing_held_counts():
    history = UsageHistory.read_back({"a": (7.0, START - WEEK)}, START, None)
    Clock(history).tick({"a": 8}, 3600)
    assert history.gpu_h == {"a": 7.0} and history.at == START + 3600
    assert decay_factor(WEEK, None) == 1.0


def test_time_gone_backwards_counts_nothing_and_moves_nothing():
    history = UsageHistory(START, WEEK, {"a": 5.0})
    history.add({"a": 8}, -30)
    history.add({"a": 8}, 0)
    assert history.gpu_h == {"a": 5.0} and history.at == START


def test_usage_decayed_to_nothing_is_forgotten_and_no_gpus_add_no_entry():
    history = UsageHistory(START, 60.0, {"gone": 1.0})
    Clock(history).tick({"idle": 0}, 60 * 30)  # 30 half-lives: a billionth of a GPU-hour
    assert history.gpu_h == {}
    assert 2 ** -30 < FORGOTTEN_GPU_H
