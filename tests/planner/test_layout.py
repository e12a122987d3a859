"""Which GPU indices running replicas hold (gpu_policy.model.layout.running_layout)."""

import pytest

from gpu_policy.errors import ScenarioError
from gpu_policy.model import Job, Node, Queue, Scenario
from gpu_policy.model.layout import running_layout


def scenario(nodes: list[Node], jobs: list[Job]) -> Scenario:
    """Built by hand, without the checks of parse_scenario: running_layout has its own."""
    return Scenario(nodes, [Queue("q", deserved=8)], jobs, source="test.yaml")


def test_given_indices_first_then_whole_gpus_lowest_healthy_then_fractions_first_fit():
    s = scenario([Node("n", 6, unhealthy_gpus=[0])],
                 [Job("half", "q", 0.5, running=["n"]),
                  Job("quarter", "q", 0.25, running=["n"]),
                  Job("two", "q", 2, running=["n"]),
                  Job("pinned", "q", 1, running=["n"], gpu_indices=[[2]]),
                  Job("third", "q", 0.25, running=["n"])])
    layout = running_layout(s)
    # pinned keeps GPU 2; two takes the lowest free healthy GPUs (1, 3); the fractions come
    # last: half opens GPU 4, quarter and third fit beside it
    assert layout.indices == {"pinned": [[2]], "two": [[1, 3]], "half": [[4]], "quarter": [[4]], "third": [[4]]}
    assert [sl.whole for sl in layout.nodes["n"].slots] == [None, "two", "pinned", "two", None, None]
    assert layout.nodes["n"].slots[4].fractions == (("half", 0.5), ("quarter", 0.25), ("third", 0.25))
    assert layout.nodes["n"].free_indices() == [5]


def test_a_fraction_that_fits_beside_no_shared_gpu_takes_the_lowest_free_one():
    s = scenario([Node("n", 3)], [Job("big", "q", 0.75, running=["n"]), Job("other", "q", 0.5, running=["n"]),
                                  Job("whole", "q", 1, running=["n"])])
    assert running_layout(s).indices == {"whole": [[0]], "big": [[1]], "other": [[2]]}


def test_whole_replicas_take_unhealthy_gpus_only_when_no_healthy_one_is_left():
    s = scenario([Node("n", 3, unhealthy_gpus=[1])], [Job("a", "q", 2, running=["n"]), Job("b", "q", 1, running=["n"])])
    assert running_layout(s).indices == {"a": [[0, 2]], "b": [[1]]}


@pytest.mark.parametrize("jobs", [
    [Job("a", "q", 2, running=["n"]), Job("b", "q", 1, running=["n"])],
    [Job("a", "q", 2, running=["n"]), Job("b", "q", 0.5, running=["n"])],
])
def test_a_running_replica_with_no_gpu_left_is_bad_input_naming_the_job(jobs):
    with pytest.raises(ScenarioError, match=r"jobs\[1\].*running.*node 'n' has no free GPU indices left"):
        running_layout(scenario([Node("n", 2)], jobs))
