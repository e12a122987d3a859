"""Shared (time-sliced, MPS) and MIG-partitioned GPUs in random clusters: every plan keeps
the checker's invariants (whole GPUs never on shared or MIG GPUs, MIG jobs only on free slices
of their profile) and settles."""

import random

import pytest

from gpu_policy import plan
from gpu_policy.model import GpuSharing, Job, Node, Queue, Scenario
from tests.planner.checker import check_plan
from tests.test_stability import assert_settles

PROFILES = {"1g.10gb": (0.125, 7), "3g.40gb": (0.5, 2)}  # share of the GPU, slices per GPU


def partitioned_cluster(seed: int) -> Scenario:
    """Six nodes of 2 GPUs: whole, shared 4 ways, or MIG with one profile; three queues with
    running and waiting work of every form."""
    rng = random.Random(seed)
    nodes, jobs = [], []
    for n in range(6):
        form = rng.choice(["whole", "shared", "1g.10gb", "3g.40gb"])
        node = Node(f"node-{n}", 2)
        if form == "shared":
            node.gpu_sharing = GpuSharing("time-slicing", 4)
        elif form != "whole":
            node.mig = {form: 2 * PROFILES[form][1]}
        nodes.append(node)
    queues = [Queue(f"q{i}", deserved=4) for i in range(3)]
    for k in range(18):
        form = rng.choice(["whole", "fraction", "1g.10gb", "3g.40gb"])
        queue = f"q{rng.randrange(3)}"
        if form == "whole":
            jobs.append(Job(f"j{k}", queue, gpus=rng.choice([1, 2]), priority=rng.choice([10, 50]), submitted_at=k))
        elif form == "fraction":
            jobs.append(Job(f"j{k}", queue, gpus=0.25, priority=rng.choice([10, 50]), submitted_at=k))
        else:
            jobs.append(Job(f"j{k}", queue, gpus=PROFILES[form][0], mig_profile=form, replicas=rng.choice([1, 2]),
                            priority=rng.choice([10, 50]), submitted_at=k))
    return Scenario(nodes=nodes, queues=queues, jobs=jobs)


@pytest.mark.parametrize("seed", range(12))
def test_partitioned_clusters_keep_the_invariants_and_settle(seed):
    s = partitioned_cluster(seed)
    first = plan(s)
    check_plan(s, first)
    assert_settles(s, 3)
    # a MIG job placed in the first plan is on a node with slices of its profile; whole jobs on whole GPUs
    for d in first.jobs:
        job = next(j for j in s.jobs if j.name == d.name)
        for r in d.replicas:
            node = next(n for n in s.nodes if n.name == r.node)
            assert (job.mig_profile in node.mig) if job.mig_profile else not node.mig
            assert job.is_fractional or not node.shared
