"""The packing stage: among placements that open no more nodes, the one that
grows the expected fragmentation least."""

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.packing.fragmentation import WorkloadMix
from gpu_policy.planner.core.packing import scenario_mix


def cpu_tight() -> dict:
    """Two 4-GPU nodes, each already running one 1-GPU job: n1 has 8 CPUs left, n2 has
    40. A waiting 1-GPU job asks for 8 CPUs: on n1 it would leave n1's last 2 GPUs
    without CPUs for anything, so it belongs on n2."""
    return {"nodes": [{"name": "n1", "gpus": 4, "cpu": 16}, {"name": "n2", "gpus": 4, "cpu": 48}],
            "queues": [{"name": "q", "deserved": 8}],
            "jobs": [{"name": "r1", "queue": "q", "gpus": 1, "cpu": 8, "running": ["n1"]},
                     {"name": "r2", "queue": "q", "gpus": 1, "cpu": 8, "running": ["n2"]},
                     {"name": "new", "queue": "q", "gpus": 1, "cpu": 8, "submitted_at": 5}]}


def test_a_job_does_not_strand_gpus_by_taking_the_last_cpus():
    result = plan(parse_scenario(cpu_tight()))
    assert result.job("new").replicas[0].node == "n2"


def test_a_fraction_joins_a_gpu_already_shared():
    s = {"nodes": [{"name": "n1", "gpus": 2}, {"name": "n2", "gpus": 2}],
         "queues": [{"name": "q", "deserved": 4}],
         "jobs": [{"name": "half", "queue": "q", "gpus": 0.5, "running": ["n1"]},
                  {"name": "whole", "queue": "q", "gpus": 1, "running": ["n2"]},
                  {"name": "f", "queue": "q", "gpus": 0.5, "submitted_at": 3}]}
    placed = plan(parse_scenario(s)).job("f").replicas[0]
    assert (placed.node, placed.gpu_indices) == ("n1", [0])


def test_the_mix_is_the_scenarios_jobs_unless_configured():
    s = cpu_tight()
    s["jobs"].append({"name": "r3", "queue": "q", "gpus": 1, "cpu": 0, "running": ["n1"]})
    s = parse_scenario(s)
    assert sorted(scenario_mix(s).weight) == [0.25, 0.75]
    assert plan(s).job("new").replicas[0].node == "n2"   # n1 would be left 1 GPU, 0 CPUs
    # for 3-GPU work that needs no CPUs, n1's CPUs do not matter and n2's 3 free GPUs do:
    # the fuller node wins (1-GPU work would be stranded by neither placement: a tie)
    gpu_only = WorkloadMix.build([(0.0, 0.0, 3, 1000, None)], [1], [""])
    assert plan(s, PlannerConfig(workload_mix=gpu_only)).job("new").replicas[0].node == "n1"


def test_pack_places_jobs_on_given_nodes_at_given_prices():
    """The packing step on its own, as a simulator would call it: a layout, the jobs with the
    node group each replica may use, and a price (one per node state)."""
    from gpu_policy.model import Job
    from gpu_policy.model.layout import running_layout
    from gpu_policy.planner.core.packing import pack

    s = parse_scenario({"nodes": [{"name": f"n{i}", "gpus": 4} for i in range(3)],
                        "queues": [{"name": "q", "deserved": 12}],
                        "jobs": [{"name": "r", "queue": "q", "gpus": 1, "running": ["n0"]}]})
    layout = running_layout(s)
    free = lambda node: len(layout.nodes[node].free_indices())  # noqa: E731
    worst_fit = lambda job, node: -free(node)  # noqa: E731  (a price: most free GPUs left first)
    big, small = Job("big", "q", 4), Job("small", "q", 1, replicas=2)
    out = pack(s, layout, [(small, ["all", "all"]), (big, ["all"])], {"all": ["n0", "n1", "n2"]}, None, worst_fit)
    # largest first: big takes an empty node; each small replica then goes to a node already in
    # use (n0, 3 free) before the empty one left, whatever the price says
    assert [p.node for p in out["big"]] == ["n1"] and [p.node for p in out["small"]] == ["n0", "n0"]
    assert pack(s, layout, [(Job("huge", "q", 4), ["all"])], {"all": ["n0", "n1"]}, None) == {"huge": None}


def test_a_job_that_may_run_anywhere_pays_for_the_scarce_model_it_takes():
    """Three quarters of the expected work may use only A100s, more than the free A100s
    hold when the work arrives in proportion: a job that may run anywhere pays, on an A100,
    the GPU it takes from that work (the simulator's `ours-*` price, `displaced`); on a
    V100, nothing. A mix confined to no model makes no model scarce."""
    import numpy as np

    from gpu_policy.model import Job
    from gpu_policy.model.layout import running_layout
    from gpu_policy.planner.core.packing import gpu_models, model_scarcity, placement_costs

    s = parse_scenario({"nodes": [{"name": "a", "gpus": 4, "gpu_model": "A100"},
                                  {"name": "v", "gpus": 4, "gpu_model": "V100"}],
                        "queues": [{"name": "q", "deserved": 8}], "jobs": []})
    layout, models = running_layout(s), gpu_models(s)
    confined = WorkloadMix.build([(0.0, 0.0, 1, 1000, frozenset({"A100"})), (0.0, 0.0, 1, 1000, None)], [3, 1], models)
    assert model_scarcity(layout, confined, models).tolist() == [1.0, 0.0]   # A100, V100
    anywhere, a100_only = Job("anywhere", "q", 2), Job("a100-only", "q", 2, gpu_model=["A100"])
    options = [(anywhere, "a", None), (anywhere, "v", None), (a100_only, "a", None)]
    priced = placement_costs(s, layout, confined, options)
    unpriced = placement_costs(s, layout, confined, options, scarce=np.zeros(len(models)))
    assert np.allclose(np.subtract(priced, unpriced), [2.0, 0.0, 0.0])    # 2 GPUs taken from A100-only work
    free_mix = WorkloadMix.build([(0.0, 0.0, 1, 1000, None)], [1], models)
    assert not model_scarcity(layout, free_mix, models).any()


def test_pack_prices_a_node_with_an_unhealthy_gpu_as_it_is():
    """Two nodes run one 1-GPU job each, so their GPUs are used alike, but one GPU of `a` is
    unhealthy: a 1-GPU job there breaks the last pair of free GPUs that 2-GPU work could
    use, on `b` a pair stays. The packing step prices each node as it is
    (`placement_costs`), whichever it meets first (it used to price both at the first's price)."""
    from gpu_policy.model import Job
    from gpu_policy.model.layout import running_layout
    from gpu_policy.planner.core.packing import pack, placement_costs

    s = parse_scenario({"nodes": [{"name": "a", "gpus": 4, "unhealthy_gpus": [3]}, {"name": "b", "gpus": 4}],
                        "queues": [{"name": "q", "deserved": 8}],
                        "jobs": [{"name": "ra", "queue": "q", "gpus": 1, "running": ["a"]},
                                 {"name": "rb", "queue": "q", "gpus": 1, "running": ["b"]}]})
    pairs = WorkloadMix.build([(0.0, 0.0, 2, 1000, None)], [1], [""])
    new = Job("new", "q", 1)
    on_a, on_b = placement_costs(s, running_layout(s), pairs, [(new, "a", None), (new, "b", None)])
    assert on_a > on_b
    for order in (["a", "b"], ["b", "a"]):
        assert pack(s, running_layout(s), [(new, ["all"])], {"all": order}, pairs)["new"][0].node == "b"
