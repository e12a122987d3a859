"""The best-fit policy places as Kueue's TAS would, on small hand-made clusters."""

import numpy as np

from gpu_policy.sim.topology.bestfit import BestFitPolicy, place
from gpu_policy.sim.topology.cluster import Cluster, Shape
from gpu_policy.sim.topology.policy import View
from gpu_policy.sim.topology.workload import Gang


def cluster(free_per_node: list[int], blocks=1, racks=3, nodes=4, gpus=8) -> Cluster:
    c = Cluster(Shape(blocks, racks, nodes, gpus))
    c.free = np.array(free_per_node, dtype=np.int64)
    return c


def gang(replicas, gpus=8, required=None, preferred=None, name="g", arrival=0.0) -> Gang:
    return Gang(name, arrival, 3600.0, replicas, gpus, required, preferred)


def racks(nodes, per=4) -> list[int]:
    return sorted({n // per for n in nodes})


def test_required_rack_takes_the_tightest_rack_that_holds_it():
    # rack 0: 3 free nodes, rack 1: 2 free nodes, rack 2: all 4 free
    c = cluster([8, 8, 8, 0] + [0, 8, 8, 0] + [8] * 4)
    nodes = place(c, gang(2, required="rack"))
    assert nodes == (5, 6)


def test_tightest_ties_go_to_the_first_domain():
    c = cluster([8, 8, 0, 0] + [8, 8, 0, 0] + [8] * 4)
    assert place(c, gang(2, required="rack")) == (0, 1)


def test_required_rack_waits_when_no_rack_holds_it_though_the_cluster_does():
    c = cluster([8, 8, 0, 0] * 3)
    assert place(c, gang(3, required="rack")) is None
    assert place(c, gang(3, preferred="rack")) is not None


def test_preferred_rack_climbs_to_the_block_then_uses_the_fewest_racks():
    # 2 blocks of 2 racks of 4 nodes; no rack holds 5; block 0 holds 6 (tightest), block 1 holds 8
    c = cluster([8, 8, 8, 0] + [8, 8, 8, 0] + [8] * 8, blocks=2, racks=2, nodes=4)
    nodes = place(c, gang(5, preferred="rack"))
    assert {n // 8 for n in nodes} == {0}
    assert racks(nodes) == [0, 1]


def test_descent_takes_the_largest_child_first_and_the_tightest_for_the_rest():
    # one block, rack 0: 1 free node, rack 1: 3, rack 2: 4 (all); 5 replicas: rack 2 (4) + rack 0 (1)
    c = cluster([8, 0, 0, 0] + [8, 8, 8, 0] + [8] * 4)
    nodes = place(c, gang(5, required="block"))
    assert racks(nodes) == [0, 2]


def test_preferred_at_the_widest_level_spreads_over_the_fewest_blocks():
    # 3 blocks of 1 rack of 4 nodes: free 2, 4, 3 nodes; 6 replicas: block 1 (4) then block 0 (2, tightest for 2)
    c = cluster([8, 8, 0, 0] + [8] * 4 + [8, 8, 8, 0], blocks=3, racks=1, nodes=4)
    nodes = place(c, gang(6, preferred="block"))
    assert sorted({n // 4 for n in nodes}) == [0, 1]


def test_a_job_asking_nothing_takes_the_nodes_with_the_least_free_room():
    c = cluster([8, 2, 4, 8] + [8] * 8)
    assert place(c, gang(1, gpus=2)) == (1,)
    assert place(c, gang(1, gpus=4)) == (2,)
    assert place(c, gang(2, gpus=4)) == (0, 2)  # node 2 (room for 1) first, then node 0


def test_several_pods_share_a_node_that_holds_them():
    c = cluster([8, 3] + [0, 0] + [0] * 8)
    assert place(c, gang(2, gpus=4)) == (0, 0)


def test_a_job_that_waits_does_not_block_the_next_in_arrival_order():
    c = cluster([8, 8, 0, 0] * 3)
    view = View(0.0, c, {}, [gang(3, required="rack", name="big"), gang(2, required="rack", name="small", arrival=1)])
    decision = BestFitPolicy().decide(view)
    assert list(decision.start) == ["small"]
    assert c.free.tolist() == [8, 8, 0, 0] * 3  # deciding changes nothing


def test_topology_blind_ignores_the_required_level():
    c = cluster([8, 8, 0, 0] * 3)
    nodes = BestFitPolicy(blind=True).decide(View(0.0, c, {}, [gang(3, required="rack")])).start["g"]
    assert racks(nodes) == [0, 1]
