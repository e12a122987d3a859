"""The engine and the metrics on a tiny run whose every number is worked out by hand."""

import pytest

from gpu_policy.sim.topology.bestfit import BestFitPolicy
from gpu_policy.sim.topology.cluster import Shape
from gpu_policy.sim.topology.engine import simulate
from gpu_policy.sim.topology.metrics import measure
from gpu_policy.sim.topology.ours import PlannerPolicy
from gpu_policy.sim.topology.workload import Gang

#: One block of two racks of two 8-GPU nodes: 32 GPUs, 16 in a rack.
SHAPE = Shape(1, 2, 2, 8)
JOBS = [
    Gang("a", 0.0, 1000.0, 1, 8),                         # t=0: node 0
    Gang("b", 50.0, 1000.0, 2, 8, required="rack"),       # t=100: rack 1, the tightest that holds it
    Gang("c", 150.0, 500.0, 2, 8, required="rack"),       # t=200: waits (24 of 32 allocated); t=1000: rack 0
    Gang("d", 160.0, 600.0, 3, 8, preferred="rack"),      # no rack holds it; t=1500: nodes 0-2, two racks
]


def test_best_fit_on_a_tiny_run():
    run = simulate(BestFitPolicy(), SHAPE, JOBS, round_s=100.0)
    assert {name: (s.at, s.nodes) for name, s in run.started.items()} == {
        "a": (0.0, (0,)), "b": (100.0, (2, 3)), "c": (1000.0, (0, 1)), "d": (1500.0, (0, 1, 2))}
    m = measure(run, seed=0)
    assert m.first_required_wait_s == 200.0
    assert m.allocated_at_first_required_wait == pytest.approx(24 / 32)
    assert m.allocated_while_required_waits == pytest.approx(24 / 32)  # only the round at t=200
    assert m.gangs == 3 and m.racks_per_gang == pytest.approx(4 / 3)  # b: 1, c: 1, d: 2
    assert m.required_broken == 0
    assert m.largest == 1 and m.largest_wait_mean_s == pytest.approx(1340.0)  # d: more GPUs than a rack
    assert m.wait_mean_s == pytest.approx((0 + 50 + 850 + 1340) / 4)
    # allocated from the first arrival to the last (0-160 s): 8 GPUs until 100, then 24
    assert m.utilization == pytest.approx((8 * 100 + 24 * 60) / (160 * 32))


def test_topology_blind_breaks_a_required_rack_and_says_so():
    m = measure(simulate(BestFitPolicy(blind=True), SHAPE, JOBS, round_s=100.0), seed=0)
    assert m.required_broken >= 1  # b on nodes 1 and 2: two racks


def test_gpu_policy_keeps_required_gangs_in_one_rack_and_starts_everyone():
    run = simulate(PlannerPolicy(), SHAPE, JOBS, round_s=100.0)
    m = measure(run, seed=0)
    assert set(run.started) == {"a", "b", "c", "d"}
    assert m.required_broken == 0
    assert m.plans == run.rounds > 0


class _Swap:
    """Moves the two running jobs onto each other's node in its first round, then decides nothing."""
    name = "swap"

    def __init__(self):
        self.rounds = 0

    def decide(self, view):
        from gpu_policy.sim.topology.policy import Decision
        self.rounds += 1
        if self.rounds == 1:
            return Decision(start={"x": (0,), "y": (1,)})
        if self.rounds == 2:
            return Decision(move={"x": (1,), "y": (0,)})
        return Decision(start={g.name: (0,) for g in view.waiting if view.cluster.free[0] >= 8})


def test_movers_may_trade_places_in_one_round():
    jobs = [Gang("x", 0.0, 500.0, 1, 8), Gang("y", 0.0, 1000.0, 1, 8), Gang("z", 10.0, 100.0, 1, 8)]
    run = simulate(_Swap(), Shape(1, 1, 2, 8), jobs, round_s=100.0)
    assert run.moves == 2
    assert run.started["z"].at == 1000.0  # y, moved to node 0, leaves it at 1000


def test_racks_by_request():
    m = measure(simulate(BestFitPolicy(), SHAPE, JOBS, round_s=100.0), seed=0)
    assert m.racks_by_request == {"preferred rack": 2.0, "required rack": 1.0}
