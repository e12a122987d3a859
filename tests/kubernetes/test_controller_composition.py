"""`gpu-policy controller` attaches GPUs through ComposabilityRequests when free GPUs and
moves cannot serve a waiting job, driven turn by turn through the real client against the
fake API server and the fake CDI operator (tests/kubernetes/fake_cdi.py). The operator
moves only when a test lets it (`cdi.settle()`): the controller reads requests through its
watch, which gives the operator no turn.

The cluster (fake_cdi.composable_cluster): node-1 full with team-a's 8 GPUs, the composable
node-3 with team-b's 2 GPUs (at most 8), a pool of 6; team-b's gated job for 4 GPUs fits
nowhere, and attaching comes before preemption."""

import pytest

from gpu_policy.controller import Controller, ControllerSettings
from gpu_policy.controller.cache import COMPOSABILITY_REQUESTS, NODES
from gpu_policy.controller.metrics import Metrics
from gpu_policy.controller.telemetry import TelemetryFeed
from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Scenario
from gpu_policy.telemetry import GpuKey, GpuReading, GpuTelemetry, TelemetrySettings, TelemetryUnavailable
from tests.kubernetes.controller_harness import (DEADLINE_S, counted_cluster, described, gated_pod, kill,
                                                new_controller, released, sees, settle)
from tests.kubernetes.fake_cdi import MODEL, composable_cluster
from tests.kubernetes.objects import attached_request, composable_node_object

OURS = "gpu-policy-node-3-a100-80gb"
PATH = f"/apis/{names.CRO_GROUP}/{names.CRO_VERSION}/{names.CRO_PLURAL}"


def team_b_waits(api, waiting: bool = True):
    """The composable cluster, team-b's namespace managed, and (`waiting`) its gated 4-GPU pod."""
    cdi = composable_cluster(api, namespace="b")
    api.put({"kind": "Namespace", "metadata": {"name": "b", "labels": {"gpu-policy.io/managed": "true"}}})
    if waiting:
        api.put(gated_pod("train", "team-b", gpus=4, namespace="b"))
    return cdi


def request_writes(api) -> list[str]:
    """The methods of every write to ComposabilityRequests, in order."""
    return [r.method for r in api.requests if r.path.startswith(PATH) and r.method not in ("GET",)]


def json_patches_of(api, namespace: str, pod: str) -> int:
    """Patches (releases) sent for the pod."""
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}"
    return sum(1 for r in api.requests if r.method == "PATCH" and r.path == path)


def size(cdi) -> int:
    return cdi.request(OURS)["spec"]["resource"]["size"]


def sample(controller, name: str, **labels) -> float | None:
    return controller.metrics.registry.get_sample_value(name, labels)


def test_one_request_then_the_job_is_released_once_its_gpus_are_attached(api, cluster, fake_time):
    cdi = team_b_waits(api)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: cdi.requests())
        assert request_writes(api) == ["POST"] and size(cdi) == 4
        assert cdi.request(OURS)["spec"]["resource"]["target_node"] == "node-3"
        assert "train" not in released(api, "b")  # its GPUs are not there yet: still gated
        # the next round may come before the watch brings the request: the cache has it from the answer
        assert ("", OURS) in c.cache.objects[COMPOSABILITY_REQUESTS]
        c.round()
        settle(c, fake_time, turns=4)  # rounds while the request is in flight: nothing asked again
        assert request_writes(api) == ["POST"] and "train" not in released(api, "b")
        said = [e for e in described(api, "b", "train") if e["reason"] == "GpuPolicyWaiting"]
        assert len(said) == 1 and said[0]["note"].startswith("WaitingForComposition: ")
        assert sample(c, "gpu_policy_pending_pods", queue="team-b", reason="WaitingForComposition") == 1
        assert sample(c, "gpu_policy_compositions_total", action="attach", result="requested") == 1

        cdi.reconcile()  # the operator picks it up: the wait's reason says where it is
        settle(c, fake_time, lambda: sample(c, "gpu_policy_composition_requests", state="NodeAllocating") == 1)
        cdi.settle()  # devices Online; the device plugin offers them on node-3
        settle(c, fake_time, lambda: "train" in released(api, "b"))
        assert released(api, "b")["train"] == "node-3" and request_writes(api) == ["POST"]
        assert sample(c, "gpu_policy_composition_requests", state="Running") == 1
        notes = [e["note"] for e in described(api, "b", "train")]
        assert notes[-1].startswith("Admitted: onto node-3")
        settle(c, fake_time, turns=3)
        assert request_writes(api) == ["POST"] and size(cdi) == 4
    finally:
        c.shut_down()


def test_a_killed_leader_s_request_is_not_asked_again(api, cluster, fake_time):
    cdi = team_b_waits(api)
    first, second = new_controller(cluster), new_controller(cluster)
    try:
        settle(first, fake_time, lambda: cdi.requests())
        settle(second, fake_time, turns=2)
        assert not second.leading and request_writes(api) == ["POST"]
        kill(first)  # killed mid-wait
        sees(second, lambda: ("", OURS) in second.cache.objects[COMPOSABILITY_REQUESTS])
        settle(second, fake_time, lambda: second.leading and second.plans >= 1)
        settle(second, fake_time, turns=3)
        assert request_writes(api) == ["POST"] and "train" not in released(api, "b")
        cdi.settle()
        settle(second, fake_time, lambda: "train" in released(api, "b"))
        assert request_writes(api) == ["POST"] and size(cdi) == 4
        assert json_patches_of(api, "b", "train") == 1
    finally:
        first.stop.set()
        second.shut_down()


def test_a_new_leader_started_after_the_request_plans_it_as_in_flight(api, cluster, fake_time):
    """A replica that starts after the request was made LISTs it once, then watches."""
    cdi = team_b_waits(api)
    asked = attached_request("node-3", MODEL, 4, requested_at=fake_time.time())
    api.put({**asked, "status": {}})  # asked just now by a replica that is gone; not picked up yet
    cdi.paused = True  # (the controller's LIST would give the operator a turn)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.plans >= 2)
        assert request_writes(api) == [] and "train" not in released(api, "b")
        (said,) = [e for e in described(api, "b", "train") if e["reason"] == "GpuPolicyWaiting"]
        assert said["note"] == ("WaitingForComposition: waiting for 4 A100-80GB to be attached to node-3: "
                                "not picked up by the operator yet")
        assert c.informer.lists[COMPOSABILITY_REQUESTS] == 1
    finally:
        c.shut_down()


def test_a_standby_and_a_fenced_leader_write_no_request(api, cluster, fake_time):
    team_b_waits(api, waiting=False)
    leader, standby = new_controller(cluster), new_controller(cluster)
    try:
        settle(leader, fake_time, lambda: leader.leading and leader.plans >= 1)
        api.put(gated_pod("train", "team-b", gpus=4, namespace="b"))
        sees(leader, lambda: leader.cache.pod("b", "train") is not None)
        sees(standby, lambda: standby.cache.pod("b", "train") is not None)
        api.inject(503, method="PUT", path=r".*/leases/.*", times=None)  # no renewal is taken
        fake_time.now = leader.lease.renewed_at + 15.0  # and its last renewal is as old as the lease
        plan = leader.round()
        assert [(c.node, c.change) for c in plan.compositions] == [("node-3", 4)]  # it would have asked
        settle(standby, fake_time, turns=3)
        assert not leader.leading and not standby.leading
        assert request_writes(api) == [] and "train" not in released(api, "b")
    finally:
        leader.stop.set()
        standby.stop.set()


def test_an_attach_the_webhook_refuses_is_the_pod_s_reason(api, cluster, fake_time):
    cdi = team_b_waits(api)
    api.put({**attached_request("node-3", MODEL, 1, ours=False), "metadata": {"name": "by-hand", "labels": {}}})
    cdi.settle()
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: described(api, "b", "train"))
        (said,) = described(api, "b", "train")
        assert said["note"].startswith(f"WaitingForComposition: ComposabilityRequest {OURS}, size 0 -> ")
        assert 'admission webhook "vcomposabilityrequest.kb.io" denied the request' in said["note"]
        assert sample(c, "gpu_policy_compositions_total", action="attach", result="failed") >= 1
        assert cdi.request(OURS) is None and "train" not in released(api, "b")
    finally:
        c.shut_down()


def caught_up(c, api, node: str, request: str) -> bool:
    """The controller's cache holds the node and the request as the API server does."""
    def version(obj):
        return (obj or {}).get("metadata", {}).get("resourceVersion")

    return (version(c.cache.objects[NODES].get(("", node))) == version(api.get("nodes", node)) and
            version(c.cache.objects[COMPOSABILITY_REQUESTS].get(("", request))) ==
            version(api.get(names.CRO_PLURAL, request, group=names.CRO_GROUP)))


class Dcgm:
    """dcgm-exporter through Prometheus, as a test states it: node-3's GPUs `idle` at 0% for
    the last hour, the others at 80%."""

    def __init__(self, fake_time, idle: set[int]):
        self.fake_time, self.idle = fake_time, idle

    def collect(self, settings: TelemetrySettings | None = None) -> GpuTelemetry:
        s = settings or TelemetrySettings()
        now, step = self.fake_time.time(), s.step()
        samples = [now - k * step for k in range(int(s.span_s // step), -1, -1)]
        gpus = {GpuKey("node-3", i): GpuReading(utilization=[(t, 0.0 if i in self.idle else 80.0) for t in samples],
                                                last_seen=now) for i in range(6)}
        return GpuTelemetry("test", now, s.window_s, gpus)


@pytest.mark.parametrize("idle, writes, left", [({2, 3, 4, 5}, ["DELETE"], None), ({4, 5}, ["PATCH"], 2)])
def test_idle_attached_gpus_are_detached_as_the_plan_says(api, cluster, fake_time, idle, writes, left):
    """node-3 holds its own 2 GPUs (team-b's pod) and 4 gpu-policy attached; DCGM says which
    have been idle for an hour (idle_detach_s: 30 min): the highest idle ones go back."""
    cdi = team_b_waits(api, waiting=False)
    api.put(attached_request("node-3", MODEL, 4, requested_at=fake_time.time() - 4000))
    node = api.get("nodes", "node-3")
    node["status"]["allocatable"]["nvidia.com/gpu"] = node["status"]["capacity"]["nvidia.com/gpu"] = "6"
    api.put(node)
    feed = TelemetryFeed(Dcgm(fake_time, idle))
    metrics = Metrics()
    c = Controller(counted_cluster(cluster, metrics, lease_duration_s=15.0),
                   ControllerSettings(debounce_s=0.2, watch_timeout_s=2.0), metrics=metrics, telemetry=feed)
    c.start()
    try:
        assert feed.collected.wait(DEADLINE_S)
        settle(c, fake_time, lambda: request_writes(api))
        assert request_writes(api) == writes
        assert sample(c, "gpu_policy_compositions_total", action="detach", result="requested") == 1
        cdi.settle()
        # the node and the request as they are now, before the next plan: between the request's
        # watch event and the node's, the node can read as still holding the detached GPUs
        # (docs/composition.md, "Decisions")
        sees(c, lambda: caught_up(c, api, "node-3", OURS))
        settle(c, fake_time, turns=4)  # the detach done, the next plans ask for nothing
        assert request_writes(api) == writes
        assert (cdi.request(OURS) or {}).get("spec", {}).get("resource", {}).get("size") == left
        assert int(api.get("nodes", "node-3")["status"]["allocatable"]["nvidia.com/gpu"]) == 6 - 4 + (left or 0)
    finally:
        c.shut_down()


def test_a_dead_leader_s_overdue_request_is_rolled_back_then_asked_anew(api, cluster, fake_time):
    """Never picked up, 400 s after it was asked (the deadline is 300 s): deleted in one round,
    not patched back in the same one, and asked again once it is gone."""
    cdi = team_b_waits(api)
    api.put({**attached_request("node-3", MODEL, 4, requested_at=fake_time.time() - 400), "status": {}})
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: request_writes(api))
        settle(c, fake_time, turns=3)
        assert request_writes(api) == ["DELETE"]
        (said,) = [e for e in described(api, "b", "train") if e["reason"] == "GpuPolicyWaiting"]
        assert "it was rolled back just now (above); the next plan asks again" in said["note"]
        cdi.settle()
        assert cdi.request(OURS) is None
        settle(c, fake_time, lambda: len(request_writes(api)) > 1)
        assert request_writes(api) == ["DELETE", "POST"] and size(cdi) == 4
    finally:
        c.shut_down()


def test_attached_gpus_the_device_plugin_has_not_counted_yet_are_not_asked_again(api, cluster):
    """The operator has the 4 devices Online; node-3's allocatable still shows its own 2."""
    team_b_waits(api, waiting=False)
    api.put(attached_request("node-3", MODEL, 4))
    node = {n.name: n for n in cluster().observe().scenario.nodes}["node-3"]
    assert node.gpus == 6


def test_prometheus_down_plans_without_telemetry_and_says_why(fake_time):
    class Down:
        def collect(self, settings=None):
            raise TelemetryUnavailable("http://prometheus:9090: connection refused")

    feed = TelemetryFeed(Down())
    assert feed.judge(None) == (None, "planned without telemetry: none collected yet")
    feed.collect()
    assert feed.judge(None) == (None, "planned without telemetry: http://prometheus:9090: connection refused")
    feed.source = Dcgm(fake_time, {5})
    feed.collect()
    signals, problem = feed.judge(Scenario(nodes=[Node("node-3", gpus=6)], queues=[], jobs=[]))
    assert problem is None and signals.gpus[GpuKey("node-3", 5)].idle and not signals.gpus[GpuKey("node-3", 4)].idle


SETTLING = "node node-3: its allocatable"


def settling(plan) -> bool:
    """The plan's look read node-3 as not counting gpu-policy's devices yet (not composed)."""
    return any(w.startswith(SETTLING) for w in plan.warnings)


def test_no_second_attach_while_the_device_plugin_has_not_counted_the_first(api, cluster, fake_time):
    """node-3 holds 4 GPUs of its own (team-b's pod 2 of them): the 4-GPU job needs 2 attached.
    Once they are Online, node-3's allocatable still reads 4, as many as its own GPUs
    before: one look cannot tell whether it counts them. The controller's looks before can."""
    cdi = team_b_waits(api)
    api.put(composable_node_object(Node(name="node-3", gpus=4, gpu_model=MODEL), max_gpus=8))
    cdi.plugin_lag = True
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: cdi.requests())
        assert request_writes(api) == ["POST"] and size(cdi) == 2
        cdi.settle()  # Running, 2 devices Online; the device plugin has not re-registered
        sees(c, lambda: c.cache.objects[COMPOSABILITY_REQUESTS][("", OURS)].get("status", {}).get("state") == "Running")
        settle(c, fake_time, turns=4)
        plan = c.round()
        assert settling(plan) and not plan.compositions and request_writes(api) == ["POST"] and size(cdi) == 2
        assert released(api, "b")["train"] == "node-3"  # its request is complete: the pods wait for the plugin
        cdi.count()  # the allocatable counts them (6): planned as before, not settling
        sees(c, lambda: caught_up(c, api, "node-3", OURS))
        settle(c, fake_time, turns=3)
        assert not settling(c.round()) and request_writes(api) == ["POST"] and size(cdi) == 2
    finally:
        c.shut_down()


def test_a_look_with_no_memory_of_the_lag_reads_the_node_short(api, cluster, fake_time):
    """What the rule cannot help, shown: a look with no memory of node-3 (a one-shot apply,
    a controller started in the lag) reads its 4 allocatable GPUs as counting the 2 Online
    devices, so node-3 reads 2 short (4, not 6) (docs/composition.md, "Decisions")."""
    team_b_waits(api)
    api.put(composable_node_object(Node(name="node-3", gpus=4, gpu_model=MODEL), max_gpus=8))
    api.put(attached_request("node-3", MODEL, 2, requested_at=fake_time.time() - 10))
    plan = cluster().observe()


@pytest.mark.parametrize("catch_up", ["allocatable", "window"])
def test_no_further_detach_while_the_device_plugin_has_not_uncounted_the_first(api, cluster, fake_time, catch_up):
    """node-3: 2 GPUs of its own and 4 attached, GPUs 4 and 5 idle for an hour: 2 go back.
    Its allocatable still reads 6 after they went, and DCGM still reads 4 and 5 idle: read
    alone, GPUs 4 and 5 would be the 2 attached left, idle, and go back too. Planning
    resumes once the allocatable counts the detach, or `composition_settle_s` after it."""
    cdi = team_b_waits(api, waiting=False)
    api.put(attached_request("node-3", MODEL, 4, requested_at=fake_time.time() - 4000))
    node = api.get("nodes", "node-3")
    node["status"]["allocatable"]["nvidia.com/gpu"] = node["status"]["capacity"]["nvidia.com/gpu"] = "6"
    api.put(node)
    cdi.plugin_lag = True
    feed = TelemetryFeed(Dcgm(fake_time, {4, 5}))
    c = Controller(cluster(lease_duration_s=15.0), ControllerSettings(debounce_s=0.2, watch_timeout_s=2.0),
                   telemetry=feed)
    c.start()
    try:
        assert feed.collected.wait(DEADLINE_S)
        settle(c, fake_time, lambda: request_writes(api))
        assert request_writes(api) == ["PATCH"] and size(cdi) == 2
        cdi.settle()  # 2 devices went; node-3's allocatable still reads 6
        sees(c, lambda: caught_up(c, api, "node-3", OURS))
        settle(c, fake_time, turns=4)
        plan = c.round()
        assert settling(plan) and not plan.compositions and request_writes(api) == ["PATCH"] and size(cdi) == 2
        if catch_up == "allocatable":
            cdi.count()
            sees(c, lambda: caught_up(c, api, "node-3", OURS))
            plan = c.round()
            assert not settling(plan) and not plan.compositions and request_writes(api) == ["PATCH"]
        else:  # the plugin never re-registers: bounded, the node is composed again (and read alone)
            fake_time.now += c.cluster.settings.composition_settle_s
            plan = c.round()
            assert not settling(plan) and [(x.node, x.change) for x in plan.compositions] == [("node-3", -2)]
    finally:
        c.shut_down()
