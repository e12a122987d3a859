"""The packing price's parts on nodes and clusters worked out by hand."""

import numpy as np
import pytest

from gpu_policy.packing import (
    ModelDemand,
    WorkloadMix,
    capacity_shortfall,
    displaced,
    node_fragmentation,
    packing_fragmentation,
    placement_cost,
)
from gpu_policy.sim.cluster import Placement, SimCluster
from gpu_policy.sim.openb import load_trace
from gpu_policy.sim.ours import CheapestPolicy, Price
from tests.sim.conftest import G2_AND_TWO_T4, write_trace


def mix(*types, weights=None, models=("A", "B")):
    return WorkloadMix.build(list(types), weights or [1] * len(types), list(models))


def measure(fn, m, free, cpu=100.0, memory=100.0, model=0):
    return float(fn(m, np.array([cpu]), np.array([memory]), np.array([free]), np.array([model]))[0])


SHARE_470 = (1, 1, 1, 470, None)       # cpu, memory, gpus, milli, models
WHOLE = (8, 1, 1, 1000, None)
TWO = (1, 1, 2, 1000, None)


def test_a_share_counts_as_many_tasks_as_fit_on_each_gpu():
    assert measure(capacity_shortfall, mix(SHARE_470), [940, 0]) == 0            # two 470s fill it
    assert measure(capacity_shortfall, mix(SHARE_470), [1000, 1000]) == pytest.approx(120)
    assert measure(node_fragmentation, mix(SHARE_470), [1000, 1000]) == 0        # FGD: all usable


def test_free_gpus_beyond_what_cpu_and_memory_can_feed_fall_short():
    # two free GPUs, CPU for 10/8 of an 8-core GPU task: 750 of the 2000 are short of CPU
    assert measure(capacity_shortfall, mix(WHOLE), [1000, 1000], cpu=10) == pytest.approx(750)
    assert measure(node_fragmentation, mix(WHOLE), [1000, 1000], cpu=10) == 0
    assert measure(capacity_shortfall, mix((1, 4, 1, 1000, None)), [1000, 1000], memory=6) == pytest.approx(500)
    # a share's CPU feeds its share of a GPU: 2 cores per 470-share feed 940 on 4 cores
    assert measure(capacity_shortfall, mix((2, 1, 1, 470, None)), [1000, 1000], cpu=4) == pytest.approx(1060)


def test_whole_gpu_tasks_use_every_free_gpu_once_one_fits():
    assert measure(capacity_shortfall, mix(TWO), [1000, 1000, 1000]) == 0
    assert measure(capacity_shortfall, mix(TWO), [1000, 0, 0]) == pytest.approx(1000)   # none fits


def test_what_cannot_run_at_all_is_all_shortfall_as_in_fgd():
    only_b = (1, 1, 1, 500, frozenset({"B"}))
    for fn in (capacity_shortfall, node_fragmentation):
        assert measure(fn, mix(only_b), [1000, 1000], model=0) == pytest.approx(2000)
    cpu_only = (1, 1, 0, 0, None)
    assert measure(capacity_shortfall, mix(cpu_only), [1000, 300]) == 0


def test_the_packing_measure_adds_the_weighted_shortfall_to_fgd():
    m = mix(SHARE_470, WHOLE, weights=[3, 1])
    free, cpu = [1000, 1000, 300], 20
    expected = measure(node_fragmentation, m, free, cpu) + 0.5 * measure(capacity_shortfall, m, free, cpu)
    packing = float(packing_fragmentation(m, np.array([cpu]), np.array([100.0]), np.array([free]), np.array([0]),
                                          capacity_weight=0.5)[0])
    assert packing == pytest.approx(expected)


def test_placement_cost_adds_best_fit_and_displaced_capacity():
    cost = placement_cost(np.array([10.0, 10.0]), np.array([1000, 3000]), best_fit_weight=0.01,
                          displaced=np.array([0.0, 500.0]))
    assert cost.tolist() == pytest.approx([20.0, 540.0])


def demand(a_only_share):
    # model A or B; one type may use only A, one any model, weighted to the given GPU demand shares
    return ModelDemand.of(mix((1, 1, 1, 1000, frozenset({"A"})), (1, 1, 1, 1000, None),
                              weights=[a_only_share, 1 - a_only_share]))


def test_a_model_is_scarce_when_its_confined_demand_overfills_it():
    free = np.array([2000.0, 8000.0])                        # A has 2 GPUs free, B 8
    assert demand(0.4).scarcity(free).tolist() == [1.0, 0.0]  # A-only pods would ask for 4 of 10
    assert demand(0.1).scarcity(free).tolist() == [0.0, 0.0]  # 1 of 10: A has room


def test_only_pods_that_could_go_elsewhere_displace_anything():
    scarce, node_model = np.array([1.0, 0.0]), np.array([0, 1, -1])
    assert displaced(np.array([True, True]), scarce, node_model, 1000).tolist() == [1000, 0, 0]
    assert displaced(np.array([True, False]), scarce, node_model, 1000).tolist() == [0, 0, 0]
    assert displaced(np.array([True, True]), scarce, node_model, 0).tolist() == [0, 0, 0]


PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
t0,4000,8192,1,1000,T4
t1,4000,8192,1,1000,T4
t2,4000,8192,1,1000,T4
g0,4000,8192,1,1000,G2
g1,4000,8192,1,1000,G2
g2,4000,8192,1,1000,G2
any,4000,8192,1,1000,
"""


def test_an_unconstrained_pod_keeps_off_a_scarce_model(tmp_path):
    nodes, pods = load_trace(write_trace(tmp_path / "t", G2_AND_TWO_T4, PODS))
    anywhere = pods.types.index(next(t for t in pods.types if t.spec is None))
    price = Price(capacity_weight=0.0, best_fit_weight=0.02)
    cluster = SimCluster(nodes, pods, measure=price.measure())
    # T4-only pods ask for 3/7 of the GPU demand, T4 has 4 of 12 GPUs: T4 is scarce
    assert cluster.model_demand.scarcity(cluster.free_by_model()).tolist() == [0.0, 1.0]
    # FGD's growth is the same on both models (as many pods cannot use either), so best fit alone
    # picks a small T4 node (less left free); the scarcity price keeps the pod on G2
    assert CheapestPolicy(Price(0.0, 0.02, model_scarcity=False)).place_one(cluster, anywhere,
                                                                           np.random.default_rng(0)).node in (1, 2)
    assert CheapestPolicy(price).place_one(cluster, anywhere, np.random.default_rng(0)).node == 0
    # once the big node is full, T4 is the only room left, and the pod goes there
    cluster.place(anywhere, Placement(0, tuple(range(8))))
    assert CheapestPolicy(price).place_one(cluster, anywhere, np.random.default_rng(0)).node in (1, 2)
