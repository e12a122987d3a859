"""Topology (rules/topology.py): a job that requires a level runs in one domain of it, on
labelled nodes; one that prefers a level spans as few domains as it can; packing keeps the
largest free domains large; the reasons name the level and the numbers. On clusters decided
whole and on large ones, where each job gets candidate domains before the program."""

import pytest

from gpu_policy import PlannerConfig, parse_scenario, plan
from gpu_policy.model.apply import apply_plan
from gpu_policy.model.topology import Domains
from gpu_policy.planner.core.packing import pack
from gpu_policy.model.layout import running_layout
from tests.planner.topology_clusters import topology_cluster

GENEROUS = PlannerConfig(time_limit_s=600.0)


def domains_of(s, result, job):
    """The domains, at the job's required level, its replicas run in after the plan."""
    d = Domains.of(s)
    level = d.level(job.topology.required)
    return {d.domain(r.node, level) for r in result.job(job.name).replicas}


def free_domains(s, result) -> dict[str, int]:
    """The most free whole GPUs in one domain of each level, counted on the applied plan."""
    after = apply_plan(s, result)
    held: dict[str, int] = {}
    for job in after.jobs:
        for node in job.running:
            held[node] = held.get(node, 0) + (1 if job.is_fractional else int(job.gpus))
    d = Domains.of(s)
    free = {n.name: n.gpus - held.get(n.name, 0) for n in s.nodes}
    return {level: max(sum(free[n] for n in nodes) for nodes in d.nodes[i].values())
            for i, level in enumerate(d.levels)}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("size", ["small", "large"])
def test_a_required_job_runs_in_one_domain(seed, size):
    """12 nodes (decided whole) or 64 (candidate domains): every started job that requires a
    level has all its replicas in one domain of it; the summary's largest free domains are
    what the applied plan leaves."""
    raw = topology_cluster(seed, blocks=2, racks=2, nodes=3) if size == "small" else topology_cluster(seed)
    s = parse_scenario(raw)
    result = plan(s, GENEROUS)
    assert result.solver.status == "Optimal"
    started = [j for j in s.jobs if j.topology and j.topology.required and result.job(j.name).action == "start"]
    assert started or size == "small"
    for job in started:
        mine = domains_of(s, result, job)
        assert len(mine) == 1 and None not in mine, (job.name, mine)
    assert result.summary["largest_free_domain_after"] == free_domains(s, result)


@pytest.mark.parametrize("seed", range(12))
def test_large_clusters_give_every_waiting_job_a_reason_of_its_own(seed):
    """On a large cluster no job that requires a domain waits without a reason the rules
    give (a candidate domain taken by others says so)."""
    s = parse_scenario(topology_cluster(seed))
    result = plan(s, GENEROUS)
    assert all(d.code != "NoRuleApplies" for d in result.jobs), [(d.name, d.reason) for d in result.jobs
                                                                  if d.code == "NoRuleApplies"]


def test_no_domain_fits_names_the_level_and_the_numbers():
    s = parse_scenario({
        "topology": [{"name": "rack", "label": "r"}],
        "nodes": [{"name": f"n{i}", "gpus": 8, "labels": {"r": f"r{i // 2}"}} for i in range(4)],
        "queues": [{"name": "a"}],
        "jobs": [{"name": "hold", "queue": "a", "gpus": 6, "priority": 100, "running": ["n0"]},
                 {"name": "hold2", "queue": "a", "gpus": 8, "priority": 100, "running": ["n2"]},
                 {"name": "gang", "queue": "a", "gpus": 8, "replicas": 2, "topology": {"required": "rack"}}]})
    d = plan(s).job("gang")
    assert d.code == "NoDomainFits"
    assert d.reason == ("needs 16 GPUs (2 x 8) in one rack; the most free in one rack is 10 GPUs "
                        "(r0, room for 1 of its 2 replicas)")


def test_a_job_no_domain_could_ever_hold_can_never_fit():
    s = parse_scenario({
        "topology": [{"name": "rack", "label": "r"}],
        "nodes": [{"name": f"n{i}", "gpus": 8, "labels": {"r": f"r{i // 2}"}} for i in range(4)],
        "queues": [{"name": "a"}],
        "jobs": [{"name": "gang", "queue": "a", "gpus": 8, "replicas": 3, "topology": {"required": "rack"}}]})
    d = plan(s).job("gang")
    assert d.code == "NoDomainFits" and d.reason.startswith("can never fit: needs 24 GPUs (3 x 8) in one rack")


def test_a_level_no_node_carries_names_its_label():
    s = parse_scenario({
        "topology": [{"name": "rack", "label": "r"}],
        "nodes": [{"name": "n0", "gpus": 8}],
        "queues": [{"name": "a"}],
        "jobs": [{"name": "pod", "queue": "a", "gpus": 1, "topology": {"required": "rack"}}]})
    d = plan(s).job("pod")
    assert d.code == "NoDomainFits" and "no node carries the label r" in d.reason


def test_a_preferring_job_may_go_where_no_label_is():
    """Preferred is no requirement: with only unlabelled nodes free, the job starts there."""
    s = parse_scenario({
        "topology": [{"name": "rack", "label": "r"}],
        "nodes": [{"name": "n0", "gpus": 8, "labels": {"r": "r0"}}, {"name": "n1", "gpus": 8}],
        "queues": [{"name": "a"}],
        "jobs": [{"name": "hold", "queue": "a", "gpus": 8, "priority": 100, "running": ["n0"]},
                 {"name": "pod", "queue": "a", "gpus": 4, "topology": {"preferred": "rack"}}]})
    assert plan(s).job("pod").action == "start"


def test_without_topology_the_summary_has_no_domains():
    s = parse_scenario({"nodes": [{"name": "n0", "gpus": 8}], "queues": [{"name": "a"}],
                        "jobs": [{"name": "pod", "queue": "a", "gpus": 4}]})
    assert "largest_free_domain_after" not in plan(s).summary


def test_packing_puts_pooled_replicas_on_the_most_preferred_nodes_first():
    """`pack` with a preference: the replica goes to the preferred node although the other
    one is the better fit by node-level packing (in use, fewer free GPUs)."""
    s = parse_scenario({"nodes": [{"name": "busy", "gpus": 8}, {"name": "empty", "gpus": 8}], "queues": [{"name": "a"}],
                        "jobs": [{"name": "run", "queue": "a", "gpus": 4, "running": ["busy"]},
                                 {"name": "new", "queue": "a", "gpus": 2}]})
    layout = running_layout(s)
    new = s.jobs[1]
    placed = pack(s, layout, [(new, ["all"])], {"all": ["busy", "empty"]}, None, prefer={"busy": 1.0, "empty": 0.0})
    assert [p.node for p in placed["new"]] == ["empty"]
    layout = running_layout(s)
    placed = pack(s, layout, [(new, ["all"])], {"all": ["busy", "empty"]}, None)
    assert [p.node for p in placed["new"]] == ["busy"]


@pytest.mark.parametrize("exact_nodes", [16, 64])
def test_a_required_block_with_a_preferred_rack_is_the_tightest_block_on_large_clusters(exact_nodes):
    """Two blocks of three racks of four nodes: block b0 has four free nodes over two racks,
    block b1 is empty. A gang of four whole nodes that requires a block and prefers a rack
    goes, on candidate domains (exact_nodes 16), to the tightest block, b0, over its two racks
    (Kueue's best fit: preferring a block with a free rack cost allocation in `simulate
    topology`); decided whole (64), the program's preference stage puts it in one rack of b1."""
    nodes, jobs = [], []
    for b in range(2):
        for r in range(3):
            for i in range(4):
                name = f"n{12 * b + 4 * r + i}"
                nodes.append({"name": name, "gpus": 8,
                              "labels": {"example.com/block": f"b{b}", "example.com/rack": f"r{r}"}})
                if b == 0 and (r == 2 or i >= 2):
                    jobs.append({"name": f"busy-{name}", "queue": "team-a", "gpus": 8, "running": [name]})
    jobs.append({"name": "gang", "queue": "team-a", "gpus": 8, "replicas": 4,
                 "topology": {"required": "block", "preferred": "rack"}})
    s = parse_scenario({"topology": [{"name": "block", "label": "example.com/block"},
                                     {"name": "rack", "label": "example.com/rack"}],
                        "queues": [{"name": "team-a", "deserved": 192}], "nodes": nodes, "jobs": jobs})
    result = plan(s, PlannerConfig(time_limit_s=600.0, exact_nodes=exact_nodes))
    assert result.job("gang").action == "start"
    d = Domains.of(s)
    replicas = result.job("gang").replicas
    blocks = {d.domain(r.node, d.level("block")) for r in replicas}
    racks = {d.domain(r.node, d.level("rack")) for r in replicas}
    if exact_nodes == 16:
        assert blocks == {("b0",)} and len(racks) == 2
    else:
        assert blocks == {("b1",)} and len(racks) == 1
