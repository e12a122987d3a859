"""The controller's cache maps objects exactly as `gpu-policy snapshot` does, reading each
pod once per change rather than once per plan."""

import time

import pytest

from gpu_policy import load_scenario
from gpu_policy.controller.cache import CONFIG_MAPS, DRA_AND_POD_GROUPS, KAI_QUEUES, NAMESPACES, NODES, PODS, Cache
from gpu_policy.controller.usage import UsageKeeper
from gpu_policy.kubernetes.read.look import look
from gpu_policy.model.scenario_dump import scenario_to_dict
from tests.conftest import SCENARIOS, scenario_files
from tests.kubernetes.dra_objects import load_dra, serve_taint_rules, taint_rule
from tests.kubernetes.objects import gpu_pod, load_into

KINDS = (NODES, PODS, NAMESPACES, CONFIG_MAPS, KAI_QUEUES, *DRA_AND_POD_GROUPS)


def filled(client) -> Cache:
    cache = Cache(client.settings.gpu_resource)
    for kind in KINDS:
        cache.replace(kind, client.list_kind(kind)[0])
    return cache


def cached_look(cluster, cache, usage=None):
    return look(cache, cluster.settings, cache.node_views(), cache.pod_views(), cluster.clocks.wall(), cluster.url,
                cluster.device_plugin_lag, cache.bad(), usage)


@pytest.mark.parametrize("path", [p for p in scenario_files() if "compos" not in p.stem], ids=lambda p: p.stem)
def test_a_snapshot_of_the_cache_is_the_one_shot_snapshot(api, cluster, path):
    load_into(api, load_scenario(path), time.time())
    k8s = cluster()
    one_shot = k8s.observe()
    # the leader's usage history, read from the usage ConfigMap on its first look
    snap, warnings, bad = cached_look(k8s, filled(k8s.client), UsageKeeper(k8s.client, k8s.settings.namespace,
                                                                           k8s.lease.check))
    assert scenario_to_dict(snap.scenario) == scenario_to_dict(one_shot.scenario)
    assert warnings + snap.warnings == one_shot.warnings and bad == one_shot.object_warnings


def test_events_change_the_cache_and_only_real_changes_matter(api, cluster):
    api.put(gpu_pod("jobs", "a", gpus=2, node="n1", labels={"gpu-policy.io/queue": "q"}))
    k8s = cluster()
    cache = filled(k8s.client)
    pod = api.get("pods", "a", "jobs")
    assert not cache.apply(PODS, "MODIFIED", pod)  # same view: nothing for a plan to see
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
    pod["spec"]["nodeName"] = "n2"
    assert cache.apply(PODS, "MODIFIED", pod)
    older = api.get("pods", "a", "jobs")
    assert not cache.apply(PODS, "MODIFIED", older)  # an event older than what the cache holds
    assert cache.pod_views()[0].node == "n2"
    assert cache.apply(PODS, "DELETED", pod) and cache.pod_views() == []


def test_a_pod_gpu_policy_cannot_read_is_left_out_naming_it(api, cluster):
    """As in a one-shot look (issue 29): the pod is left out with a warning naming it and the
    field, and everything else is still planned; its deletion clears the warning."""
    k8s = cluster()
    cache = filled(k8s.client)
    bad = gpu_pod("jobs", "bad", gpus=1)
    bad["metadata"]["annotations"] = {"gpu-policy.io/replicas": "two"}
    cache.apply(PODS, "ADDED", bad)
    cache.apply(PODS, "ADDED", gpu_pod("jobs", "good", gpus=1))
    assert [p.name for p in cache.pod_views()] == ["good"]
    assert [(w.object, w.field) for w in cache.bad()] == [("pod jobs/bad", "metadata.annotations.gpu-policy.io/replicas")]
    cache.apply(PODS, "DELETED", bad)
    assert cache.bad() == []


def test_a_dra_cluster_s_cache_snapshots_as_the_one_shot_look(api, cluster):
    """DRA kinds and PodGroups come from the cache (no LIST at look time), mapped as a LIST's."""
    load_dra(api, load_scenario(SCENARIOS / "dra-cluster.yaml"), time.time())
    serve_taint_rules(api)
    api.put(taint_rule("drain", {"pool": "dra-1", "device": "gpu-3"}))
    k8s = cluster()
    one_shot = k8s.observe()
    cache = filled(k8s.client)
    api.reset_log()
    snap, warnings, bad = cached_look(k8s, cache)
    assert scenario_to_dict(snap.scenario) == scenario_to_dict(one_shot.scenario)
    assert [n.unhealthy_gpus for n in snap.scenario.nodes if n.name == "dra-1"] == [[3]]
    assert warnings + snap.warnings == one_shot.warnings and bad == one_shot.object_warnings
    assert not [r for r in api.requests if r.verb == "list"]
