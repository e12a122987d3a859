"""The informer: LIST once per kind, then WATCH; a dropped watch resumes where it was, a 410
relists that kind only, and steady state costs no LIST."""

import logging

from gpu_policy.model import Node
from tests.kubernetes.controller_harness import cluster_of, gated_pod, new_controller, released, sees, settle
from tests.kubernetes.dra_objects import claiming, gpu_claim, gpu_class, gpu_device, resource_slice, serve_dra
from tests.kubernetes.objects import node_object


def lists(api, plural: str) -> int:
    return sum(1 for r in api.requests if r.verb == "list" and r.resource == f"/{plural}")


def test_dropped_watches_resume_and_a_410_relists_that_kind_only(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        api.drop_watches(abrupt=True)
        api.put(gated_pod("after-drop", "a"))
        settle(c, fake_time, lambda: "after-drop" in released(api))
        api.expire_history("pods")
        api.put(gated_pod("after-410", "a"))
        settle(c, fake_time, lambda: "after-410" in released(api))
        assert c.informer.lists["pods"] == 2 and c.informer.lists["nodes"] == 1
        assert lists(api, "pods") == 2 and lists(api, "nodes") == 1
        text = c.metrics.text().decode()
        assert 'gpu_policy_watch_restarts_total{resource="pods"}' in text
    finally:
        c.stop.set()


def test_steady_state_costs_no_list(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        listed = sum(1 for r in api.requests if r.verb == "list")
        for i in range(5):
            api.put(gated_pod(f"p-{i}", "b"))
            fake_time.now += 61  # a resync each time, from the cache
            settle(c, fake_time, lambda: f"p-{i}" in released(api))
        assert sum(1 for r in api.requests if r.verb == "list") == listed
        assert c.plans >= 6
    finally:
        c.stop.set()


def dra_controller(api, cluster):
    """A DRA-only node (8 GPUs in a ResourceSlice), KAI and Volcano PodGroups served; neither the
    coscheduling plugin's PodGroups nor DeviceTaintRules (a Kubernetes 1.34 cluster)."""
    cluster_of(api, nodes=0, queues=[{"name": "a", "deserved": 8}, {"name": "b", "deserved": 8}])
    serve_dra(api)
    api.add_resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", namespaced=True)
    api.add_resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True)
    api.put(gpu_class())
    dra_node(api, "dra-0")
    return new_controller(cluster)


def dra_node(api, name: str) -> None:
    node = node_object(Node(name, 0))
    node["status"]["allocatable"].pop("nvidia.com/gpu")
    api.put(node)
    api.put(resource_slice(name, [gpu_device(name, i, "NVIDIA H100 80GB HBM3") for i in range(8)]))


def gated_dra_pod(api, name: str, queue: str, gpus: int) -> None:
    api.put(gpu_claim("jobs", f"{name}-gpus", gpus))
    api.put(claiming(gated_pod(name, queue), f"{name}-gpus"))


def custom_lists(api) -> dict[str, int]:
    """LISTs so far of the DRA kinds and PodGroups, by group/plural."""
    out: dict[str, int] = {}
    for r in api.requests:
        if r.verb == "list" and ("resource.k8s.io" in r.resource or "podgroups" in r.resource):
            out[r.resource] = out.get(r.resource, 0) + 1
    return out


def test_dra_kinds_and_pod_groups_are_listed_once_then_watched(api, cluster, fake_time, caplog):
    caplog.set_level(logging.INFO, logger="gpu_policy.controller.informer")
    c = dra_controller(api, cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 1)
        at_start = custom_lists(api)
        assert at_start == {f"resource.k8s.io/{p}": 1 for p in ("resourceslices", "resourceclaims",
                                                                 "resourceclaimtemplates", "deviceclasses",
                                                                 "devicetaintrules")} | {
            f"{g}/podgroups": 1 for g in ("scheduling.run.ai", "scheduling.volcano.sh", "scheduling.x-k8s.io")}
        # the kinds the cluster does not serve: said once each, never watched nor asked again
        skipped = [r.getMessage() for r in caplog.records if "does not serve" in r.getMessage()]
        assert sorted(skipped) == [f"the cluster does not serve {k}: not watched (restart gpu-policy once it does)"
                                   for k in ("composability_requests", "coscheduling_pod_groups", "device_taint_rules",
                                             "kueue_topologies", "train_jobs")]
        assert api.watch_connections("podgroups", "scheduling.x-k8s.io") == 0
        gated_dra_pod(api, "train", "a", 4)
        settle(c, fake_time, lambda: "train" in released(api))
        assert released(api)["train"] == "dra-0"
        dra_node(api, "dra-1")  # a new node's slice arrives by its watch
        gated_dra_pod(api, "more", "b", 8)
        settle(c, fake_time, lambda: "more" in released(api))
        assert released(api)["more"] == "dra-1"
        api.put({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "pg", "namespace": "jobs"}, "spec": {"minMember": 2}})
        sees(c, lambda: ("jobs", "pg") in c.cache.objects["volcano_pod_groups"])
        for _ in range(3):
            fake_time.now += 61  # resyncs, from the cache
            settle(c, fake_time)
        assert custom_lists(api) == at_start  # steady state: no LIST of any of these kinds
        assert c.plans >= 5
    finally:
        c.stop.set()


def test_a_refused_watch_waits_as_long_as_the_api_server_asked(api, cluster):
    """A watch answered 429 with Retry-After: 30 is tried again after 30 s, not after the
    informer's own 1 s (the contract: 429 and 5xx are retried with Retry-After, or doubling
    backoff when the answer has none). Driven on the informer's own stop event: no time passes."""
    import queue
    import threading

    from gpu_policy.controller.informer import Informer
    from gpu_policy.kubernetes.transport.kinds import NODES

    class Stop(threading.Event):
        """Records each wait, and stops the watch after `waits` of them."""

        def __init__(self, waits: int):
            super().__init__()
            self.waited, self.waits = [], waits

        def wait(self, timeout=None):
            self.waited.append(timeout)
            if len(self.waited) >= self.waits:
                self.set()
            return self.is_set()

    cluster_of(api)
    k8s = cluster()
    api.inject(429, method="GET", path="/api/v1/nodes", times=2, retry_after=30)
    stop = Stop(waits=2)
    Informer(k8s.client, [NODES], queue.Queue(), stop)._watch(NODES, "1")
    assert stop.waited == [30.0, 30.0]
    api.inject(503, method="GET", path="/api/v1/nodes", times=2)  # no Retry-After: the informer's own doubling
    stop = Stop(waits=2)
    Informer(k8s.client, [NODES], queue.Queue(), stop)._watch(NODES, "1")
    assert stop.waited == [1.0, 2.0]
