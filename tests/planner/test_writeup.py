"""The numbers a Plan reports beside its decisions (gpu_policy.planner.writeup) agree with
the decisions themselves, counted here another way: the queues' pending demand, the
summary's counts, and the free room the plan leaves (from the scenario as it is after the
plan), on seeded random clusters with departments, fractions, gangs and unhealthy GPUs."""

from collections import Counter

import pytest

from gpu_policy import parse_scenario, plan
from gpu_policy.model.apply import apply_plan
from gpu_policy.model.layout import Layout, running_layout
from tests.planner.random_clusters import random_scenario, rich_scenario


def largest_free_block(layout: Layout) -> int:
    """Most free healthy GPUs on one node, counted from the layout."""
    return max((len(nl.free_indices()) for nl in layout.nodes.values()), default=0)


def _with_unhealthy(data: dict) -> dict:
    """The first node's GPU 1 unhealthy (kept jobs on it stay; new work avoids it)."""
    data["nodes"][0]["unhealthy_gpus"] = [1]
    return data


SCENARIOS = ([random_scenario(seed, (20, 40), (40, 90)) for seed in range(100, 104)]
             + [rich_scenario(seed) for seed in range(0, 40, 4)]
             + [_with_unhealthy(rich_scenario(seed)) for seed in range(1, 40, 6)])


@pytest.mark.parametrize("data", SCENARIOS)
def test_reported_numbers_agree_with_the_decisions(data):
    s = parse_scenario(data)
    result = plan(s)
    parent = {q.name: q.parent for q in s.queues}
    pending: Counter = Counter()
    for job in s.jobs:
        q = job.queue
        while q is not None and not job.is_running:
            pending[q] += job.total_gpus
            q = parent[q]
    for report in result.queues:
        assert report.pending_demand == pytest.approx(pending[report.name]), report.name
    actions = Counter(d.action for d in result.jobs)
    assert [result.summary[k] for k in ("starts", "preemptions", "moves", "waiting")] == \
           [actions["start"], actions["preempt"], actions["move"], actions["wait"]]
    layout = running_layout(apply_plan(s, result))
    assert result.summary["largest_free_block_after"] == largest_free_block(layout)
    assert result.summary["empty_nodes_after"] == sum(1 for nl in layout.nodes.values()
                                                      if all(sl.free for sl in nl.slots))
