"""The controller's cache maps objects exactly as `gpu-policy snapshot` does, reading each
pod once per change rather than once per plan."""

import time

import pytest

from gpu_policy import load_scenario
from gpu_policy.controller.cache import CONFIG_MAPS, DRA_AND_POD_GROUPS, KAI_QUEUES, NAMESPACES, NODES, PODS, Cache
from gpu_policy.controller.usage import UsageKeeper
from gpu_policy.kubernetes.read.look import look
from gpu_policy.errors import ScenarioError
from gpu_policy.kubernetes.names import TERMINATING_QUEUE, UNMANAGED_QUEUE
from gpu_policy.model.scenario_dump import scenario_to_dict
from gpu_policy.model.scenario_file import check_built, check_changed
from gpu_policy.planner import plan
from tests.conftest import SCENARIOS, scenario_files
from tests.kubernetes.dra_objects import load_dra, serve_taint_rules, taint_rule
from tests.kubernetes.objects import gpu_pod, load_into

KINDS = (NODES, PODS, NAMESPACES, CONFIG_MAPS, KAI_QUEUES, *DRA_AND_POD_GROUPS)


def filled(client) -> Cache:
    cache = Cache(client.settings.gpu_resource)
    for kind in KINDS:
        cache.replace(kind, client.list_kind(kind)[0])
    return cache


def cached_look(cluster, cache, usage=None, memo=None):
    return look(cache, cluster.settings, cache.node_views(), cache.pod_views(), cluster.clocks.wall(), cluster.url,
                cluster.device_plugin_lag, cache.bad(), usage, memo)


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


@pytest.mark.parametrize("path", [p for p in scenario_files() if "compos" not in p.stem], ids=lambda p: p.stem)
def test_a_look_that_keeps_what_did_not_change_is_a_fresh_look(api, cluster, path):
    """The controller's looks keep each job and node no watch event changed (kubernetes/read/memo.py).
    Planned on (nothing that reads a scenario may change what is kept), then looked at again
    after a change, the cache maps as a fresh look does, and what did not change is the very
    object kept."""
    load_into(api, load_scenario(path), time.time())
    k8s = cluster()
    cache = filled(k8s.client)
    first = cached_look(k8s, cache, memo=cache.memo)[0]
    plan(first.scenario)
    cache.apply(PODS, "ADDED", gpu_pod("jobs", "late", gpus=1))
    kept, warnings, bad = cached_look(k8s, cache, memo=cache.memo)
    fresh, fresh_warnings, fresh_bad = cached_look(k8s, cache)  # a memo of its own, kept nowhere
    assert scenario_to_dict(kept.scenario) == scenario_to_dict(fresh.scenario)
    assert (warnings + kept.warnings, bad) == (fresh_warnings + fresh.warnings, fresh_bad)
    assert all(a is b for a, b in zip(kept.scenario.nodes, first.scenario.nodes))  # the pod is on none of them
    before = {id(j) for j in first.scenario.jobs}
    again = [j for j in kept.scenario.jobs if id(j) in before]
    assert len(again) >= len([j for j in first.scenario.jobs if not j.checkpoint_age_s]) // 2  # most jobs too


@pytest.mark.parametrize("path", [p for p in scenario_files() if "compos" not in p.stem], ids=lambda p: p.stem)
def test_a_kept_job_ages_with_the_time(api, cluster, fake_time, path):
    """An hour later and nothing else changed: every kept job's running, waiting and checkpoint
    ages are a fresh look's, set on a copy; nothing else of it differs from the job kept."""
    load_into(api, load_scenario(path), time.time())
    k8s = cluster()
    cache = filled(k8s.client)
    first = cached_look(k8s, cache, memo=cache.memo)[0]
    fake_time.sleep(3600)
    kept = cached_look(k8s, cache, memo=cache.memo)[0]
    fresh = cached_look(k8s, cache)[0]
    assert scenario_to_dict(kept.scenario) == scenario_to_dict(fresh.scenario)
    timed = ("running_for_s", "waiting_for_s", "checkpoint_age_s")
    before = {j.name: j for j in first.scenario.jobs}
    for job in kept.scenario.jobs:
        old = before[job.name]
        if job.queue in (UNMANAGED_QUEUE, TERMINATING_QUEUE):
            continue  # built anew every look
        if any(getattr(job, k) is not None for k in timed):
            assert job is not old and {k: v for k, v in vars(job).items() if k not in timed} == \
                {k: v for k, v in vars(old).items() if k not in timed}
            assert all(getattr(job, k) == getattr(old, k) + 3600 for k in timed if getattr(job, k) is not None)
        else:
            assert job is old


def test_the_checks_of_what_changed_name_a_problem_as_the_whole_check():
    """check_changed checks the jobs it is told of (those a kept look made anew), not the others
    (kept: they passed before), and the ages set anew by their range; a problem is named as the
    whole scenario's check names it."""
    scenario = load_scenario(SCENARIOS / "move-not-preempt.yaml")
    job = scenario.jobs[1]
    gpus, job.gpus = job.gpus, -1  # out of range
    check_changed(scenario, None, [], [], [], {})  # not told of it
    with pytest.raises(ScenarioError) as whole:
        check_built(scenario)
    with pytest.raises(ScenarioError) as told:
        check_changed(scenario, None, [job], [], [], {})
    assert str(told.value) == str(whole.value) and "jobs[1]" in str(told.value)
    job.gpus, job.running_for_s = gpus, 10 ** 12  # past the most seconds a scenario may say
    with pytest.raises(ScenarioError, match=r"jobs\[1\].*running_for_s"):
        check_changed(scenario, None, [], [], [], {"running_for_s": (0, 10 ** 12)})


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
