"""The FGD fragmentation measure on nodes worked out by hand."""

import numpy as np
import pytest

from gpu_policy.packing.fragmentation import WorkloadMix, node_fragmentation


def mix(*types, weights=None, models=("A", "B")):
    return WorkloadMix.build(list(types), weights or [1] * len(types), list(models))


def frag(m, free, cpu=100.0, memory=100.0, model=0):
    return float(node_fragmentation(m, np.array([cpu]), np.array([memory]), np.array([free]), np.array([model]))[0])


HALF = (1, 1, 1, 500, None)     # cpu, memory, gpus, milli, models
TWO_WHOLE = (1, 1, 2, 1000, None)


def test_a_share_leaves_gpus_with_less_than_it_needs_as_fragments():
    # GPUs free 1000, 300, 0: a half-GPU task can use only the first
    assert frag(mix(HALF), [1000, 300, 0]) == pytest.approx(300)


def test_a_task_that_does_not_fit_makes_every_free_gpu_a_fragment():
    # one whole free GPU: a 2-GPU task fits nowhere, so all 1300 are fragments for it
    assert frag(mix(TWO_WHOLE), [1000, 300, 0]) == pytest.approx(1300)
    assert frag(mix(HALF, TWO_WHOLE), [1000, 300, 0]) == pytest.approx(0.5 * 300 + 0.5 * 1300)


def test_weights_are_shares_of_the_workload():
    assert frag(mix(HALF, TWO_WHOLE, weights=[3, 1]), [1000, 300, 0]) == pytest.approx(0.75 * 300 + 0.25 * 1300)


def test_a_node_out_of_cpu_strands_all_its_gpus():
    assert frag(mix(HALF), [1000, 1000], cpu=0.5) == pytest.approx(2000)
    assert frag(mix(HALF), [1000, 1000], memory=0.5) == pytest.approx(2000)


def test_the_wrong_gpu_model_strands_all_its_gpus():
    only_b = (1, 1, 1, 500, frozenset({"B"}))
    assert frag(mix(only_b), [1000, 1000], model=0) == pytest.approx(2000)
    assert frag(mix(only_b), [1000, 1000], model=1) == pytest.approx(0)


def test_cpu_only_tasks_leave_no_gpu_fragment_while_they_fit():
    cpu_only = (1, 1, 0, 0, None)
    assert frag(mix(cpu_only), [1000, 300]) == 0
    assert frag(mix(cpu_only), [1000, 300], cpu=0.5) == pytest.approx(1300)


def test_an_empty_mix_is_refused():
    with pytest.raises(ValueError, match="at least one task type"):
        WorkloadMix.build([], [], ["A"])
