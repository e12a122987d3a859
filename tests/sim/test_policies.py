"""Each placement policy's rule on a cluster where the right answer is known, and
the invariants every policy keeps over a whole inflation run."""

import numpy as np
import pytest

from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.solve import solve_stages
from gpu_policy.sim.cluster import Placement, SimCluster
from gpu_policy.sim.compare import POLICIES
from gpu_policy.sim.inflation import run, stream_bound
from gpu_policy.sim.openb import load_trace
from gpu_policy.sim.ours import _window_program, default_solver

HALF, QUARTER, WHOLE4, CPU_ONLY, SHARE810, T4_WHOLE = 1, 2, 3, 4, 5, 6


@pytest.fixture
def trace(trace_dir):
    return load_trace(trace_dir)


def choose(name, cluster, t):
    return POLICIES[name]().place_one(cluster, t, np.random.default_rng(0))


def test_best_fit_fills_the_fullest_node_and_gpu(trace):
    cluster = SimCluster(*trace)
    cluster.place(HALF, Placement(2, (1,)))
    assert choose("best-fit", cluster, QUARTER) == Placement(3, (0,))   # 2 GPUs free beat 3.5
    cluster.place(QUARTER, Placement(3, (0,)))
    assert choose("best-fit", cluster, QUARTER) == Placement(3, (0,))   # the GPU with 750 left
    cluster.place(WHOLE4, Placement(0, (0, 1, 2, 3)))
    cluster.place(WHOLE4, Placement(0, (4, 5, 6, 7)))
    assert choose("best-fit", cluster, CPU_ONLY).node in (0, 4)        # no free GPU there to strand


def test_spread_takes_the_node_with_most_free_gpu_and_its_emptiest_gpu(trace):
    cluster = SimCluster(*trace)
    cluster.place(HALF, Placement(0, (0,)))
    where = choose("spread", cluster, QUARTER)
    assert where.node == 1 and cluster.free[1, where.gpus[0]] == 1000


def test_fgd_puts_a_share_where_fragmentation_grows_least(trace):
    cluster = SimCluster(*trace)
    cluster.place(SHARE810, Placement(3, (0,)))     # node 3 GPU 0 has 190 left
    delta, _ = cluster.fragmentation_delta(QUARTER)
    where = choose("fgd", cluster, QUARTER)
    assert delta[where.node] == delta[np.isfinite(delta)].min()
    # and the choice really is the least growth: place it and compare with the alternatives
    before = cluster.fragmentation()
    _, level = cluster.fragmentation_delta(QUARTER)
    growth = {}
    for n in map(int, np.flatnonzero(np.isfinite(delta))):
        trial = cluster.scratch()
        trial.place(QUARTER, Placement(n, trial.gpus_for(QUARTER, n, int(level[n]))))
        growth[n] = trial.fragmentation() - before
    assert growth[where.node] == pytest.approx(min(growth.values()))


@pytest.mark.parametrize("name", list(POLICIES))
def test_a_whole_run_never_overcommits_and_stays_under_the_bound(name, trace):
    nodes, pods = trace
    result = run(nodes, pods, POLICIES[name](), seed=2, inflate=1.2, window=4)
    assert 0 < result.allocation_ratio <= stream_bound(nodes, pods, 2, 1.2) + 1e-9
    assert result.pods_placed <= result.pods_arrived
    assert result.curve[0] == (0.0, 100.0) and result.curve[-1][0] >= 100 * 1.2
    # unallocated never goes up while pods arrive, since none leave
    unallocated = [u for _, u in result.curve]
    assert all(b <= a + 1e-9 for a, b in zip(unallocated, unallocated[1:]))


def test_the_pod_stream_is_the_same_for_every_policy(trace):
    nodes, pods = trace
    arrived = {name: run(nodes, pods, POLICIES[name](), seed=5, window=4).pods_arrived for name in POLICIES}
    singles = {arrived[n] for n in POLICIES if not POLICIES[n]().batched}
    assert len(singles) == 1


def test_ours_batched_places_a_window_that_fits_together(trace):
    nodes, pods = trace
    cluster = SimCluster(nodes, pods)
    window = [WHOLE4, WHOLE4, WHOLE4, HALF, HALF, QUARTER, QUARTER, CPU_ONLY]
    placed = POLICIES["ours-batched"]().place_window(cluster, window, np.random.default_rng(0))
    assert all(p is not None for p in placed)
    assert cluster.allocated_milli == 3 * 4000 + 2 * 500 + 2 * 250
    assert (cluster.free >= 0).all() and (cluster.cpu >= 0).all()


def solved_window(cluster, options):
    """Which options the window program takes, per pod: `options` is [(type, node, gpu)]."""
    window = [t for t, _, _ in options]
    m = _window_program(cluster, window, [[(Placement(n, (g,)), 0.0)] for _, n, g in options])
    solve_stages(m, PlannerConfig(solver=default_solver(), time_limit_s=120))
    return [round(m.x[p, 0].varValue) for p in range(len(options))]


def test_ours_window_program_keeps_what_a_gpu_and_a_node_hold(trace):
    """The capacity rows (`gpu_policy.planner.rules.fits`) bind: shares on one GPU fit in
    it, and whole-GPU pods and GPUs opened for shares fit in the node's free GPUs."""
    nodes, pods = trace
    cluster = SimCluster(nodes, pods)
    # node 3 has 2 free T4s: 810 + 500 do not share GPU 0; 500 + 250 do
    assert solved_window(cluster, [(SHARE810, 3, 0), (HALF, 3, 0)]) == [1, 0]
    assert solved_window(cluster, [(HALF, 3, 0), (QUARTER, 3, 0)]) == [1, 1]
    # a whole T4 and two shares opening both GPUs: one share gives way (the most GPU placed)
    assert solved_window(cluster, [(T4_WHOLE, 3, 0), (HALF, 3, 0), (HALF, 3, 1)]) in ([1, 1, 0], [1, 0, 1])
    # a GPU already half used holds two more quarters, not three
    cluster.place(HALF, Placement(3, (0,)))
    assert sum(solved_window(cluster, [(QUARTER, 3, 0)] * 3)) == 2
