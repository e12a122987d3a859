"""The simulated cluster: where pods fit, and the fragmentation growth it caches."""

import numpy as np
import pytest

from gpu_policy.sim.cluster import Placement, SimCluster
from gpu_policy.sim.openb import load_trace


@pytest.fixture
def cluster(trace_dir):
    return SimCluster(*load_trace(trace_dir))


def test_fits_respects_gpus_cpu_and_model(cluster):
    whole8, t4_only, cpu_only = 7, 6, 4
    assert list(cluster.fits(whole8)) == [True, True, False, False, False]
    assert list(cluster.fits(t4_only)) == [False, False, True, True, False]
    assert list(cluster.fits(cpu_only)) == [True] * 5
    cluster.place(whole8, Placement(0, tuple(range(8))))
    assert list(cluster.fits(whole8)) == [False, True, False, False, False]


def test_a_share_goes_to_the_fullest_gpu_that_fits(cluster):
    half, quarter = 1, 2
    cluster.place(quarter, Placement(2, (3,)))
    assert cluster.gpus_for(half, 2) == (3,)          # 750 free: the fullest that fits
    cluster.place(half, Placement(2, (3,)))
    assert cluster.free[2].tolist()[:4] == [1000, 1000, 1000, 250]
    assert cluster.allocated_milli == 750


def test_overcommitting_a_gpu_is_refused(cluster):
    cluster.place(5, Placement(3, (0,)))               # 810 of GPU 0
    with pytest.raises(ValueError, match="has 190 free, needs 500"):
        cluster.place(1, Placement(3, (0,)))


def test_cached_growth_equals_the_fragmentation_difference(cluster):
    rng = np.random.default_rng(3)
    for _ in range(25):
        t = int(rng.integers(len(cluster.types)))
        delta, level = cluster.fragmentation_delta(t)
        fits = np.flatnonzero(np.isfinite(delta))
        assert set(fits) == set(np.flatnonzero(cluster.fits(t)))
        if not len(fits):
            continue
        n = int(fits[rng.integers(len(fits))])
        before = cluster.fragmentation()
        cluster.place(t, Placement(n, cluster.gpus_for(t, n, int(level[n]))))
        assert cluster.fragmentation() - before == pytest.approx(delta[n] / 1000, abs=1e-9)


def test_scratch_copies_do_not_touch_the_cluster(cluster):
    trial = cluster.scratch()
    trial.place(3, Placement(0, (0, 1, 2, 3)))
    assert cluster.free[0].tolist() == [1000] * 8 and cluster.allocated_milli == 0
