"""A controller's look that keeps what no watch event changed (kubernetes/read/memo.py) is a fresh
look: through many rounds of random watch changes, and through what the topology and the usage
history change: a node's level label, the levels (the queues ConfigMap's topology.yaml, a Kueue
Topology) and the usage ConfigMap."""

import random
import time

import pytest
import yaml

from gpu_policy import load_scenario
from gpu_policy.controller.cache import (COMPOSABILITY_REQUESTS, CONFIG_MAPS, KUEUE_TOPOLOGY_OBJECTS, NODES, PODS,
                                         RESOURCE_CLAIMS)
from gpu_policy.errors import GpuPolicyError
from gpu_policy.kubernetes import names
from gpu_policy.model.scenario_dump import scenario_to_dict
from gpu_policy.planner import plan
from tests.conftest import SCENARIOS, scenario_files
from tests.kubernetes.churn import Churn, described
from tests.kubernetes.controller_harness import cluster_of, gated_pod
from tests.kubernetes.dra_objects import allocate, claiming, gpu_claim, load_dra
from tests.kubernetes.fake_cdi import MODEL, composable_cluster
from tests.kubernetes.objects import (attached_request, kueue_topology, load_into, serve_kueue_topologies,
                                      usage_config_map)
from tests.kubernetes.test_controller_cache import cached_look, filled

BLOCK, RACK = "example.com/block", "example.com/rack"


def kept_is_fresh(k8s, cache):
    """The look that keeps (the cache's memo) after a change; asserted equal to a fresh look: its
    scenario (the jobs and nodes in their order), warnings, objects left out, and what acting reads."""
    kept, warnings, bad = cached_look(k8s, cache, memo=cache.memo)
    fresh, fresh_warnings, fresh_bad = cached_look(k8s, cache)  # a memo of its own, kept nowhere
    assert scenario_to_dict(kept.scenario) == scenario_to_dict(fresh.scenario)
    assert (warnings + kept.warnings, bad) == (fresh_warnings + fresh.warnings, fresh_bad)
    assert described(kept) == described(fresh)
    assert [list(d) for d in (kept.gated, kept.marked, kept.asked)] == [list(d) for d in (fresh.gated, fresh.marked,
                                                                                        fresh.asked)]
    return kept.scenario, bad


@pytest.mark.parametrize("seed", range(8))
def test_through_random_changes_a_kept_look_is_a_fresh_look(api, cluster, fake_time, seed):
    """60 rounds of 1-6 random watch changes each (tests/kubernetes/churn.py) and the clock moving
    0-3 s: every round the look that keeps is a fresh look, or both fail with the same words (a
    broken queues ConfigMap; the next look after it makes everything again). Every fifth round
    the kept scenario is planned, twice: planning changes nothing kept (the scenario is as it
    was, and so is the next look)."""
    rng = random.Random(seed)
    churn = Churn(api, rng, fake_time)
    k8s = cluster()
    cache = filled(k8s.client)
    planned = 0
    for round_ in range(60):
        for _ in range(rng.randint(1, 6)):
            churn.step(cache)
        fake_time.now += rng.choice([0, 0.3, 1, 2.6])
        kept = same_look(k8s, cache)
        if kept is not None and round_ % 5 == 0:
            before = scenario_to_dict(kept)
            first, second = plan(kept), plan(kept)
            assert scenario_to_dict(kept) == before
            assert [(d.name, d.action, d.replicas) for d in first.jobs] == \
                [(d.name, d.action, d.replicas) for d in second.jobs]
            planned += 1
    assert planned >= 6  # most rounds look (a broken ConfigMap fails a few)


def same_look(k8s, cache):
    """`kept_is_fresh`'s scenario, or None when both looks fail, with the same words (the memo's
    next look makes everything again)."""
    try:
        return kept_is_fresh(k8s, cache)[0]
    except GpuPolicyError as e:
        with pytest.raises(type(e)) as fresh:
            cached_look(k8s, cache)
        assert str(fresh.value) == str(e)
        return None


def rewritten(api, cache, kind: str, obj: dict) -> None:
    """Write `obj` to the API server and give the cache its WATCH event (a newer resourceVersion)."""
    cache.apply(kind, "MODIFIED", api.put(obj))


@pytest.mark.parametrize("path", [p for p in scenario_files() if "compos" in p.stem], ids=lambda p: p.stem)
def test_a_composing_cluster_s_kept_look_is_a_fresh_look(api, cluster, fake_time, path):
    """Its composable nodes are planned as composed: a kept look is a fresh look after a pod
    arrives, is bound to one and ends, with composition switched off (the composable ConfigMap
    gone) and on again."""
    s = load_scenario(path)
    load_into(api, s, fake_time.time())
    k8s = cluster()
    cache = filled(k8s.client)
    cache.replace(COMPOSABILITY_REQUESTS, k8s.client.list_kind(COMPOSABILITY_REQUESTS)[0])
    assert kept_is_fresh(k8s, cache)[0].composable is not None
    pod = api.put(gated_pod("late", s.queues[0].name, gpus=1))
    cache.apply(PODS, "ADDED", pod)
    kept_is_fresh(k8s, cache)
    del pod["spec"]["schedulingGates"]
    pod["spec"]["nodeName"] = s.composable.nodes[0].name  # at its most GPUs, it may not take one more: both fail
    cache.apply(PODS, "MODIFIED", api.put(pod))
    same_look(k8s, cache)
    api.delete("pods", "late", "jobs")
    cache.apply(PODS, "DELETED", pod)
    kept_is_fresh(k8s, cache)
    config = api.get("configmaps", names.COMPOSABLE_CONFIGMAP, names.DEFAULT_NAMESPACE)
    api.delete("configmaps", names.COMPOSABLE_CONFIGMAP, names.DEFAULT_NAMESPACE)
    cache.apply(CONFIG_MAPS, "DELETED", config)
    assert kept_is_fresh(k8s, cache)[0].composable is None
    del config["metadata"]["resourceVersion"]
    cache.apply(CONFIG_MAPS, "ADDED", api.put(config))
    assert kept_is_fresh(k8s, cache)[0].composable is not None


def test_a_dra_cluster_s_kept_look_is_a_fresh_look(api, cluster, fake_time):
    """On a DRA-only cluster a pod's GPUs are its claims': a kept look is a fresh look after a pod
    and its claim arrive, the claim is allocated for the pod, the pod is bound, and another
    pod's claim goes."""
    load_dra(api, load_scenario(SCENARIOS / "dra-cluster.yaml"), fake_time.time())
    k8s = cluster()
    cache = filled(k8s.client)
    kept_is_fresh(k8s, cache)
    claim = api.put(gpu_claim("jobs", "late-gpus", 2))
    cache.apply(RESOURCE_CLAIMS, "ADDED", claim)
    pod = api.put(claiming(gated_pod("late", "team-a"), "late-gpus"))
    cache.apply(PODS, "ADDED", pod)
    assert [j.gpus for j in kept_is_fresh(k8s, cache)[0].jobs if j.name == "jobs/late"] == [2]
    claim = api.put(allocate(claim, "dra-1", ["gpu-6", "gpu-7"], [("late", pod["metadata"]["uid"])]))
    cache.apply(RESOURCE_CLAIMS, "MODIFIED", claim)
    kept_is_fresh(k8s, cache)
    del pod["spec"]["schedulingGates"]
    pod["spec"]["nodeName"] = "dra-1"
    cache.apply(PODS, "MODIFIED", api.put(pod))
    assert [j.running for j in kept_is_fresh(k8s, cache)[0].jobs if j.name == "jobs/late"] == [["dra-1"]]
    gone = api.objects("resourceclaims", "jobs", group="resource.k8s.io")[0]
    api.delete("resourceclaims", gone["metadata"]["name"], "jobs", group="resource.k8s.io")
    cache.apply(RESOURCE_CLAIMS, "DELETED", gone)
    kept_is_fresh(k8s, cache)


def test_gpus_being_attached_are_planned_while_composition_is_on(api, cluster, fake_time):
    """A request in progress: node-3 is planned with the 4 GPUs being attached while the
    composable ConfigMap exists, with its own 2 once it is gone, and with 6 again when it is back."""
    composable_cluster(api)
    request = attached_request("node-3", MODEL, 4, requested_at=fake_time.time() - 60)
    request["status"] = {}  # just created: the operator has not started
    api.put(request)
    k8s = cluster()
    cache = filled(k8s.client)
    cache.replace(COMPOSABILITY_REQUESTS, k8s.client.list_kind(COMPOSABILITY_REQUESTS)[0])
    config = api.get("configmaps", names.COMPOSABLE_CONFIGMAP, names.DEFAULT_NAMESPACE)
    for gone, gpus in ((False, 6), (True, 2), (False, 6)):
        if gone:
            api.delete("configmaps", names.COMPOSABLE_CONFIGMAP, names.DEFAULT_NAMESPACE)
            cache.apply(CONFIG_MAPS, "DELETED", config)
        else:
            cache.apply(CONFIG_MAPS, "MODIFIED", api.put({**config, "metadata": {
                k: v for k, v in config["metadata"].items() if k != "resourceVersion"}}))
        assert kept_is_fresh(k8s, cache)[0].node("node-3").gpus == gpus


def test_a_node_s_new_rack_label_is_seen_the_other_nodes_kept(api, cluster):
    load_into(api, load_scenario(SCENARIOS / "topology-required-rack-waits.yaml"), time.time())
    k8s = cluster()
    cache = filled(k8s.client)
    first = cached_look(k8s, cache, memo=cache.memo)[0].scenario
    node = api.get("nodes", "n4")
    node["metadata"]["labels"][RACK] = "r3"
    rewritten(api, cache, NODES, node)
    kept, _ = kept_is_fresh(k8s, cache)
    assert kept.node("n4").labels[RACK] == "r3"
    assert all(kept.node(n) is first.node(n) for n in ("n1", "n2", "n3"))


@pytest.mark.parametrize("levels, required", [
    ([{"name": "block", "label": BLOCK}], None),  # the gang's level is gone: planned without its request
    ([{"name": "block", "label": BLOCK}, {"name": "rack", "label": "example.com/row"}], "rack"),  # a new label
])
def test_new_levels_in_the_queues_config_map_are_seen(api, cluster, levels, required):
    load_into(api, load_scenario(SCENARIOS / "topology-required-rack-waits.yaml"), time.time())
    k8s = cluster()
    cache = filled(k8s.client)
    first = cached_look(k8s, cache, memo=cache.memo)[0].scenario
    assert first.node("n1").labels[RACK] == "r1"
    queues = api.get("configmaps", names.QUEUES_CONFIGMAP, names.DEFAULT_NAMESPACE)
    queues["data"][names.TOPOLOGY_KEY] = yaml.safe_dump(levels)
    rewritten(api, cache, CONFIG_MAPS, queues)
    kept, _ = kept_is_fresh(k8s, cache)
    assert [level.label for level in kept.topology] == [level["label"] for level in levels]
    assert all(RACK not in n.labels for n in kept.nodes)  # no level selects it any more
    (gang,) = [j for j in kept.jobs if j.name == "jobs/gang"]
    assert (gang.topology and gang.topology.required) == required


def test_a_changed_kueue_topology_is_seen(api, cluster):
    """Its levels go from block and rack to block (the gang asking for a rack is left out), and back."""
    cluster_of(api, nodes=4, queues=[{"name": "a", "deserved": 32}],
               labels={f"n{i}": {BLOCK: "b1", RACK: f"r{(i + 1) // 2}"} for i in range(1, 5)})
    serve_kueue_topologies(api)
    api.put(kueue_topology("default", [BLOCK, RACK]))
    for i in range(2):
        pod = gated_pod(f"gang-{i}", "a", gpus=8, job="gang", replicas=2)
        pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = RACK
        api.put(pod)
    k8s = cluster()
    cache = filled(k8s.client)
    cache.replace(KUEUE_TOPOLOGY_OBJECTS, k8s.client.list_kind(KUEUE_TOPOLOGY_OBJECTS)[0])
    first = cached_look(k8s, cache, memo=cache.memo)[0].scenario
    assert [j.topology.required for j in first.jobs] == [RACK]
    group = names.KUEUE_GROUP
    for labels, required in (([BLOCK], []), ([BLOCK, RACK], [RACK])):
        rewritten(api, cache, KUEUE_TOPOLOGY_OBJECTS, {**api.get(names.KUEUE_TOPOLOGIES, "default", group=group),
                                                       "spec": {"levels": [{"nodeLabel": x} for x in labels]}})
        kept, bad = kept_is_fresh(k8s, cache)
        assert [level.label for level in kept.topology] == labels
        assert [j.topology.required for j in kept.jobs] == required
        assert {n.labels.get(RACK) for n in kept.nodes} == ({"r1", "r2"} if RACK in labels else {None})
        assert len(bad) == (0 if required else 2)


def test_a_changed_usage_config_map_is_seen(api, cluster, fake_time):
    """A one-shot look's usage (the ConfigMap as it is), through a cache whose look keeps the rest."""
    load_into(api, load_scenario(SCENARIOS / "usage-lighter-gets-more.yaml"), fake_time.time())
    k8s = cluster()
    cache = filled(k8s.client)
    first = cached_look(k8s, cache, memo=cache.memo)[0].scenario
    assert {q.name: round(q.usage_gpu_h) for q in first.queues} == {"a": 2327, "b": 776}
    rewritten(api, cache, CONFIG_MAPS, usage_config_map({"a": 10.0, "b": 500.0}, k8s.clocks.wall()))
    kept, _ = kept_is_fresh(k8s, cache)
    assert {q.name: round(q.usage_gpu_h) for q in kept.queues} == {"a": 10, "b": 500}
    assert all(a is b for a, b in zip(kept.nodes, first.nodes))

