"""The upper bound on any policy's allocation ratio, on streams worked out by hand,
and every policy's run on a constrained cluster staying under it."""

import numpy as np
import pytest

from gpu_policy.sim.bound import Arrivals, allocation_bound
from gpu_policy.sim.compare import POLICIES
from gpu_policy.sim.inflation import run, stream_bound
from gpu_policy.sim.openb import load_trace
from tests.sim.conftest import G2_AND_TWO_T4, write_trace

ANY = None


def arrivals(*groups):
    """(thousandths asked by one pod, share of one GPU or 0, models or None, count) per group."""
    asked, share, models, count = zip(*groups)
    return Arrivals(np.array(asked), np.array(share), [m if m is None else frozenset(m) for m in models],
                    np.array(count))


def whole(count, models=ANY, gpus=1):
    return (1000 * gpus, 0, models, count)


def share(size, count, models=ANY):
    return (size, size, models, count)


ONE_MODEL = {"A": 4000}


def test_big_shares_leave_gaps_that_larger_pods_cannot_fill():
    # four 810 shares on 4 GPUs leave 4 x 190; the 200 shares do not fit there
    assert allocation_bound(arrivals(share(810, 4), share(200, 4)), ONE_MODEL) == pytest.approx(3240 / 4000)


def test_small_shares_fill_the_gaps():
    assert allocation_bound(arrivals(share(810, 4), share(190, 4)), ONE_MODEL) == pytest.approx(1.0)
    assert allocation_bound(arrivals(share(810, 4), share(190, 2)), ONE_MODEL) == pytest.approx(3620 / 4000)


def test_dropping_big_shares_can_be_the_lesser_loss():
    # ten 600 shares and four whole pods on 10 GPUs: placing every 600 leaves 10 x 400 that no
    # whole pod fits (6000); dropping four of them lets the whole pods in: 6 x 600 + 4 x 1000
    assert allocation_bound(arrivals(share(600, 10), whole(4)), {"A": 10_000}) == pytest.approx(0.76)


def test_shares_of_half_a_gpu_or_less_bound_nothing():
    assert allocation_bound(arrivals(share(500, 2), share(300, 2), share(250, 4)), {"A": 2000}) == 1.0


def test_no_more_is_placed_than_asked():
    assert allocation_bound(arrivals(whole(3)), ONE_MODEL) == pytest.approx(0.75)


def test_pods_confined_to_a_model_fit_only_its_capacity():
    # model A has 2 GPUs, B 2; three whole pods may use only A, one any model
    two_and_two = {"A": 2000, "B": 2000}
    assert allocation_bound(arrivals(whole(3, {"A"}), whole(1)), two_and_two) == pytest.approx(0.75)
    assert allocation_bound(arrivals(whole(3), whole(1)), two_and_two) == 1.0
    assert allocation_bound(arrivals(whole(3, {"A", "B"}), whole(1)), two_and_two) == 1.0


def test_models_and_gaps_together():
    # A has 2 GPUs, B 1: three 810 shares may use only A, so at most two fit, each leaving 190 that
    # only the one 190 share can fill; B takes the whole pod. Reached by 810+190 | 810 on A.
    bound = allocation_bound(arrivals(share(810, 3, {"A"}), share(190, 1), whole(1)), {"A": 2000, "B": 1000})
    assert bound == pytest.approx((2 * 810 + 190 + 1000) / 3000)


def test_a_model_the_cluster_lacks_places_nothing():
    assert allocation_bound(arrivals(whole(2, {"Z"}), whole(2)), ONE_MODEL) == pytest.approx(0.5)


def test_many_distinct_model_sets_stay_quick_and_valid():
    # 200 models, a pod confined to each and one more for the first: only that one can be lost
    capacity = {f"m{i}": 1000 for i in range(200)}
    groups = [whole(1, {f"m{i}"}) for i in range(200)] + [whole(1, {"m0"})]
    assert allocation_bound(arrivals(*groups), capacity) == 1.0
    groups[-1] = whole(1, {"m0", "m1"})
    assert allocation_bound(arrivals(*groups), capacity) == 1.0


#: For `G2_AND_TWO_T4`: half the GPU capacity asked for may use only T4.
CONSTRAINED_PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
p0,4000,8192,1,1000,T4
p1,4000,8192,1,810,T4
p2,2000,4096,1,470,
p3,4000,8192,1,1000,
p4,2000,4096,1,650,T4
p5,8000,16384,2,1000,
p6,4000,8192,1,1000,T4
"""


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_stays_under_the_model_aware_bound(name, tmp_path):
    nodes, pods = load_trace(write_trace(tmp_path / "t", G2_AND_TWO_T4, CONSTRAINED_PODS))
    bounds = []
    for seed in range(3):
        bounds.append(stream_bound(nodes, pods, seed))
        assert run(nodes, pods, POLICIES[name](), seed, window=4).allocation_ratio <= bounds[-1] + 1e-9
    assert min(bounds) < 0.8     # where T4-only pods ask for more than T4's 4 GPUs, the bound sees it
