"""A controller's look that keeps what no watch event changed (kubernetes/read/memo.py) sees
what the topology and the usage history change, as a fresh look does: a node's level label,
the levels (the queues ConfigMap's topology.yaml, a Kueue Topology) and the usage ConfigMap."""

import time

import pytest
import yaml

from gpu_policy import load_scenario
from gpu_policy.controller.cache import CONFIG_MAPS, KUEUE_TOPOLOGY_OBJECTS, NODES
from gpu_policy.kubernetes import names
from gpu_policy.model.scenario_dump import scenario_to_dict
from tests.conftest import SCENARIOS
from tests.kubernetes.controller_harness import cluster_of, gated_pod
from tests.kubernetes.objects import kueue_topology, load_into, serve_kueue_topologies, usage_config_map
from tests.kubernetes.test_controller_cache import cached_look, filled

BLOCK, RACK = "example.com/block", "example.com/rack"


def kept_is_fresh(k8s, cache):
    """The look that keeps (the cache's memo) after a change; asserted equal to a fresh look."""
    kept, warnings, bad = cached_look(k8s, cache, memo=cache.memo)
    fresh, fresh_warnings, fresh_bad = cached_look(k8s, cache)  # a memo of its own, kept nowhere
    assert scenario_to_dict(kept.scenario) == scenario_to_dict(fresh.scenario)
    assert (warnings + kept.warnings, bad) == (fresh_warnings + fresh.warnings, fresh_bad)
    return kept.scenario, bad


def rewritten(api, cache, kind: str, obj: dict) -> None:
    """Write `obj` to the API server and give the cache its WATCH event (a newer resourceVersion)."""
    cache.apply(kind, "MODIFIED", api.put(obj))


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

