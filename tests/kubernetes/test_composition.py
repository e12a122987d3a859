"""Composition on a live cluster, through the real client against the fake API server and
the fake CDI operator (tests/kubernetes/fake_cdi.py): what a look reads, the
ComposabilityRequests gpu-policy writes, and the step that waits for them.

Most plans with compositions here are made by hand (tests/compose_helpers.py), so that each
case (an operator error, a refusal, a detach) is exactly the one wanted;
test_the_planner_attaches_and_the_waiting_step_starts takes the planner's own decision."""

import json

import pytest

from gpu_policy import Job
from gpu_policy.cli import main
from gpu_policy.actions.cycle import apply_plan_once, observe, wait_for_step
from gpu_policy.errors import ClusterObjectError, ClusterUnavailable
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.reservations import read_reservations
from gpu_policy.model import Node, Queue, Scenario
from gpu_policy.model.cluster import Orders
from gpu_policy.model.plan import Composition
from tests.compose_helpers import composed_plan
from tests.kubernetes.fake_cdi import MODEL, FakeCdiOperator, attach_for, composable_cluster
from tests.kubernetes.objects import (attached_request, composable_config_map, composable_node_object, node_object,
                                      queues_config_map)

OURS = "gpu-policy-node-3-a100-80gb"
PATH = f"/apis/{names.CRO_GROUP}/{names.CRO_VERSION}/{names.CRO_PLURAL}"
OUTAGE = ('Internal error occurred: failed calling webhook "vcomposabilityrequest.kb.io": failed to call webhook: '
          'Post "https://composable-resource-operator-webhook-service.composable-resource-operator-system.svc:443/'
          'validate-cro-hpsys-ibm-ie-com-v1alpha1-composabilityrequest?timeout=10s": dial tcp 10.96.0.12:443: '
          'connect: connection refused')


@pytest.fixture
def cdi(api):
    """The composable cluster of tests/kubernetes/fake_cdi.py and its operator."""
    return composable_cluster(api)


def allocatable(api, node: str) -> int:
    return int(api.get("nodes", node)["status"]["allocatable"]["nvidia.com/gpu"])


def writes(api, path: str) -> list[str]:
    return [r.method for r in api.requests if r.path == path and r.method != "GET"]


def reservations(api) -> list[str]:
    return sorted(r.key for r in read_reservations(api.get("configmaps", names.RESERVATIONS_CONFIGMAP, "gpu-policy"))[0])


def step(cluster, fake_time, progress=None, max_wait_s=600, **settings):
    return wait_for_step(cluster(**settings), Job("b/train", "team-b", 4), execute=True, max_wait_s=max_wait_s,
                         poll_interval_s=30, clock=fake_time.monotonic, sleep=fake_time.sleep,
                         progress=progress.append if progress is not None else None)


# -- reading ---------------------------------------------------------------------------------------

def test_a_look_reads_composable_nodes_pool_and_requests(api, cdi, cluster):
    api.put(composable_node_object(Node(name="node-4", gpus=0), max_gpus=4))  # a CPU node composition may give GPUs
    api.put(attached_request("node-9", MODEL, 1, ours=False))  # someone else's, elsewhere: out of the pool all the same
    api.reset_log()
    obs = cluster().observe()
    c = obs.scenario.composable
    assert [(n.name, n.max_gpus, n.attached) for n in c.nodes] == [("node-3", 8, 0), ("node-4", 4, 0)]
    assert [(p.model, p.free) for p in c.pools] == [(MODEL, 5)] and c.attach_seconds == 120
    assert obs.scenario.node("node-4").gpus == 0  # kept although it has no GPU yet
    assert obs.observed["api_calls"] == 7 and api.calls(PATH) == 1  # one LIST of requests per look


def test_a_cluster_without_composable_nodes_costs_no_more_calls(api, cluster):
    api.put(node_object(Node(name="n", gpus=8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("q")], jobs=[])))
    obs = cluster().observe()
    assert obs.scenario.composable is None and obs.observed["api_calls"] == 5  # 4, and the ResourceSlices 404


def test_labelled_nodes_without_the_config_map_are_a_warning(api, cdi, cluster):
    api.delete("configmaps", names.COMPOSABLE_CONFIGMAP, "gpu-policy")
    obs = cluster().observe()
    assert obs.scenario.composable is None and api.calls(PATH) == 0
    assert any("node-3 are labelled composable, but ConfigMap gpu-policy/gpu-policy-composable does not exist" in w
               for w in obs.warnings)


def test_no_operator_is_a_warning(api, cluster):
    api.put(composable_node_object(Node(name="node-3", gpus=2, gpu_model=MODEL), max_gpus=8))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("q")], jobs=[])))
    api.put(composable_config_map({"pools": [{"model": MODEL, "free": 6}]}))
    obs = cluster().observe()  # the fake serves no ComposabilityRequest resource: no CRD
    assert obs.scenario.composable is None
    assert any("no ComposabilityRequest resource (is the CDI operator installed?)" in w for w in obs.warnings)


def test_a_request_in_progress_is_planned_as_done(api, cdi, cluster, fake_time):
    """GPUs being attached are the node's (its highest indices), out of the pool; a step on
    them waits. Requests that are not gpu-policy's count against the pool only."""
    request = attached_request("node-3", MODEL, 4, requested_at=fake_time.time() - 60)
    request["status"] = {}  # just created: the operator has not started
    api.put(request)
    api.put(attached_request("node-5", MODEL, 1, ours=False))
    cdi.paused = True
    obs = cluster().observe()
    assert obs.scenario.node("node-3").gpus == 6 and obs.scenario.composable.node("node-3").attached == 4
    assert obs.scenario.composable.pool(MODEL).free == 1
    assert obs.backend.composed.attaching == {"node-3": 4}


def test_a_planner_s_looks_remember_what_the_device_plugin_counts(api, cdi, cluster, fake_time):
    """One KubernetesCluster (an `apply` execution, the controller's) across looks: node-3
    holds 4 GPUs of its own, 2 are attached, and its allocatable still reads 4. A look that
    saw the devices come Online while the allocatable stayed reads it as not counting them
    (6 GPUs) and leaves node-3 out of the composable nodes, until the allocatable changes or
    `composition_settle_s` passes; a first look cannot tell, and reads it as counting them."""
    api.put(composable_node_object(Node(name="node-3", gpus=4, gpu_model=MODEL), max_gpus=8))
    request = attached_request("node-3", MODEL, 2, requested_at=fake_time.time())
    api.put({**request, "status": {}})
    cdi.paused, cdi.plugin_lag = True, True
    k8s = cluster()
    assert k8s.observe().scenario.node("node-3").gpus == 6  # in flight: 4 of its own and 2 being attached
    cdi.paused = False
    cdi.settle()  # Online; the allocatable still reads 4
    cdi.paused = True
    obs = k8s.observe()
    assert obs.scenario.node("node-3").gpus == 6 and obs.backend.composed.settling == {"node-3"}
    assert obs.scenario.composable.nodes == [] and any(w.startswith("node node-3: its allocatable 4 GPUs do not "
                                                                  "count") for w in obs.warnings)
    assert cluster().observe().scenario.node("node-3").gpus == 4  # a first look: read alone
    fake_time.now += k8s.settings.composition_settle_s  # the plugin never re-registers: bounded
    obs = k8s.observe()
    assert obs.scenario.node("node-3").gpus == 4 and obs.backend.composed.settling == set()
    assert [n.name for n in obs.scenario.composable.nodes] == ["node-3"]


@pytest.mark.parametrize("plugin_first", [False, True])
def test_the_device_plugin_may_count_before_or_after_the_operator_s_status(plugin_first):
    """A node of 2 GPUs of its own gets 4 attached (allocatable 2 -> 6, Online 0 -> 4), the
    two changes seen in either order: read right once both are seen, settling only while
    the allocatable lags."""
    from gpu_policy.kubernetes.read.settle import DevicePluginLag

    lag = DevicePluginLag(settle_s=120.0)
    assert lag.counted("n", 2, 0, now=0.0) == (0, False)
    if plugin_first:
        lag.counted("n", 6, 0, now=1.0)  # read alone: the next look's Online devices explain it
        assert lag.counted("n", 6, 4, now=2.0) == (4, False)
    else:
        assert lag.counted("n", 2, 4, now=1.0) == (0, True)  # 2 of its own, the 4 not counted yet
        assert lag.counted("n", 2, 4, now=60.0) == (0, True)
        assert lag.counted("n", 6, 4, now=61.0) == (4, False)
    assert lag.counted("n", 6, 0, now=200.0) == (4, True)  # detached: the allocatable still counts them
    assert lag.counted("n", 6, 0, now=320.0) == (0, False)  # 120 s on: read alone


@pytest.mark.parametrize("annotation,problem", [
    (None, 'is required on a node labelled gpu-policy.io/composable: "true"'),
    ("eight", 'must be a whole number of GPUs from 0 to 1,024, got "eight"'),
])
def test_a_bad_max_gpus_annotation_leaves_the_node_out(api, cdi, kubeconfig, capsys, annotation, problem):
    """A node's annotation is one object's input: the node is left out, the rest is planned."""
    node = api.get("nodes", "node-3")
    notes = node["metadata"]["annotations"]
    notes.pop(names.MAX_GPUS_ANNOTATION) if annotation is None else notes.update({names.MAX_GPUS_ANNOTATION: annotation})
    api.put(node)
    assert main(["plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 0
    out = capsys.readouterr()
    assert f"node node-3: metadata.annotations.gpu-policy.io/max-gpus: {problem}: left out of planning" \
        in out.out + out.err


def test_max_gpus_below_the_node_s_gpus_is_one_line(api, cdi, kubeconfig, capsys):
    node = api.get("nodes", "node-3")
    node["metadata"]["annotations"][names.MAX_GPUS_ANNOTATION] = "1"
    api.put(node)
    assert main(["plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 2
    assert capsys.readouterr().err.strip() == ("gpu-policy: node node-3: metadata.annotations.gpu-policy.io/max-gpus: "
                                               "must be at least the node's 2 GPUs (allocatable, and being attached), "
                                               "got 1")


@pytest.mark.parametrize("text,message", [
    ("pools: [{model: A100-80GB, free: -1}]", "data.composable.yaml.pools[0].free: must be >= 0, got -1"),
    ("pools: [{model: A100-80GB, free: 6}]\nnodes: []", "data.composable.yaml.nodes: composable nodes come from "
                                                         "the node label gpu-policy.io/composable"),
    ("pools: [{model: A100-80GB, free: [6}]", "data.composable.yaml: not valid YAML or JSON at line 1"),
    ("- 6", "data.composable.yaml: must be a mapping with pools: [{model, free}], got list"),
    ("pool: 6", "data.composable.yaml.pool: unknown field (did you mean pools? allowed: attach_seconds, "
                "before_preemption, idle_detach_s, nodes, pools)"),
])
def test_a_bad_config_map_is_one_line(api, cdi, kubeconfig, capsys, text, message):
    api.put({"kind": "ConfigMap", "metadata": {"name": names.COMPOSABLE_CONFIGMAP, "namespace": "gpu-policy"},
             "data": {names.COMPOSABLE_KEY: text}})
    assert main(["plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpu-policy: ConfigMap gpu-policy/gpu-policy-composable: {message}"), err


# -- writing -----------------------------------------------------------------------------------------

def test_a_step_waits_for_its_gpus_then_starts(api, cdi, cluster, fake_time, monkeypatch):
    """Issue 13, "Done when": a request is created, reaches Running, and the waiting step starts."""
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train"))
    said = []
    decision = step(cluster, fake_time, said)
    assert decision.can_start and decision.nodes == ["node-3"] and decision.attempts == 1
    created = cdi.request(OURS)
    assert created["metadata"]["labels"] == {names.MANAGED_BY_LABEL: names.MANAGED_BY}
    assert created["spec"]["resource"] == {"type": "gpu", "model": MODEL, "size": 4, "target_node": "node-3",
                                           "allocation_policy": "samenode"}
    assert created["status"]["state"] == "Running" and allocatable(api, "node-3") == 6  # the device plugin's count
    assert said == [f"waiting for 4 {MODEL} to be attached to node-3: {stage}"
                    for stage in ("not picked up by the operator yet", "NodeAllocating", "Updating")]
    assert fake_time.sleeps == [30] * 5  # it polled, each poll one GET
    assert [(o.action, o.result) for o in decision.outcomes] == [("attach", "requested"), ("reserve", "done")]
    assert reservations(api) == ["b.train"] and writes(api, PATH) == ["POST"]
    after = cluster().observe().scenario  # and the next look sees 4 attached GPUs, 2 left in the pool
    assert (after.node("node-3").gpus, after.composable.node("node-3").attached) == (6, 4)
    assert after.composable.pool(MODEL).free == 2


def test_the_planner_attaches_and_the_waiting_step_starts(api, cdi, cluster, fake_time):
    """The same, with the planner's own decision: b/train (4 GPUs) has no room and team-a is
    within its share, so the plan attaches exactly 4 A100-80GB to node-3; the request reaches
    Running and the step starts there."""
    said = []
    decision = step(cluster, fake_time, said)
    assert decision.can_start and decision.nodes == ["node-3"] and decision.plan.summary["preemptions"] == 0
    assert [(c.node, c.model, c.change) for c in decision.plan.compositions] == [("node-3", MODEL, 4)]
    assert decision.plan.job("b/train").replicas[0].gpu_indices == [2, 3, 4, 5]
    assert decision.reason == f"starts when 4 {MODEL} are attached to node-3, about 120 s"
    assert cdi.request(OURS)["spec"]["resource"]["size"] == 4 and cdi.request(OURS)["status"]["state"] == "Running"
    assert allocatable(api, "node-3") == 6 and said[-1] == f"waiting for 4 {MODEL} to be attached to node-3: Updating"
    assert [(o.action, o.result) for o in decision.outcomes] == [("attach", "requested"), ("reserve", "done")]
    again = step(cluster, fake_time)  # the step's next look: its GPUs are there, nothing more is attached
    assert again.can_start and again.plan.compositions == [] and writes(api, PATH) == ["POST"]


def test_a_step_that_cannot_wait_long_enough_says_what_it_waits_for(api, cdi, cluster, fake_time, monkeypatch):
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train"))
    decision = step(cluster, fake_time, max_wait_s=0)  # a sensor's poke: one look
    assert not decision.can_start and decision.node_affinity == {} and decision.nodes == []
    assert decision.reason == f"waiting for 4 {MODEL} to be attached to node-3: not picked up by the operator yet"
    assert reservations(api) == ["b.train"]  # its GPUs stay promised while they come
    monkeypatch.undo()  # the next poke: the real planner keeps the reservation on the GPUs being attached
    cdi.settle()
    again = step(cluster, fake_time, max_wait_s=0)
    assert again.can_start and again.nodes == ["node-3"] and writes(api, PATH) == ["POST"]


def test_the_step_command_says_what_it_waits_for(api, cdi, kubeconfig, capsys, monkeypatch):
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("ml/train"))
    assert main(["step", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--job", "train", "--queue", "team-b",
                 "--gpus", "4", "--max-wait", "60", "--poll", "0.01"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["can_start"] and out["nodes"] == ["node-3"] and out["node_selector"] == {"kubernetes.io/hostname": "node-3"}
    assert [o["action"] for o in out["outcomes"]] == ["attach", "reserve"]
    assert captured.err.splitlines() == [f"gpu-policy: waiting for 4 {MODEL} to be attached to node-3: {stage}"
                                         for stage in ("not picked up by the operator yet", "NodeAllocating", "Updating")]


def test_right_after_a_patch_running_is_not_done(api, cdi, cluster, fake_time, monkeypatch):
    """The operator still reads Running, with the old devices, until its next turn."""
    api.put(attached_request("node-3", MODEL, 2))
    node = api.get("nodes", "node-3")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "4"  # 2 of its own, 2 attached
    api.put(node)
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train", gpus=2, first=4))
    said = []
    decision = step(cluster, fake_time, said)
    assert decision.can_start and allocatable(api, "node-3") == 6
    assert said[0] == f"waiting for 2 {MODEL} to be attached to node-3: Running"
    assert cdi.request(OURS)["spec"]["resource"]["size"] == 4 and writes(api, f"{PATH}/{OURS}") == ["PATCH"]
    assert cdi.request(OURS)["metadata"]["annotations"][names.PREVIOUS_SIZE_ANNOTATION] == "2"


def test_an_operator_error_is_reported_verbatim_and_rolled_back(api, cdi, cluster, fake_time, monkeypatch):
    """Issue 13, "Done when": an operator error surfaces verbatim within the deadline; then
    the size goes back, and so does the step's reservation."""
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train"))
    cdi.fail(OURS, "failed to add resource: fabric manager: no device of model A100-80GB is free",
             "CDI fabric manager answered 503")
    said = []
    decision = step(cluster, fake_time, said, composition_deadline_s=300)
    assert not decision.can_start
    assert f"waiting for 4 {MODEL} to be attached to node-3: Updating (failed to add resource: fabric manager: " \
           "no device of model A100-80GB is free)" in said
    assert decision.reason.startswith(f"ComposabilityRequest {OURS}: not complete 300 s after its size became 4: "
                                      "status.error: failed to add resource: fabric manager: no device of model "
                                      "A100-80GB is free; gpu-0001: CDI fabric manager answered 503; ")
    assert decision.reason.endswith("size rolled back to 0")
    assert 300 <= sum(fake_time.sleeps) <= 330  # within the deadline, and one poll after it
    assert cdi.request(OURS)["metadata"].get("deletionTimestamp")  # size 0: the request goes
    assert reservations(api) == []
    cdi.settle()
    assert cdi.request(OURS) is None and allocatable(api, "node-3") == 2  # Cleaning -> Deleting -> gone


def test_a_request_another_planner_left_behind_is_rolled_back_by_the_next(api, cdi, cluster, fake_time, kubeconfig,
                                                                          capsys):
    """No waiting step is needed: the request carries when its size changed, so any later
    execution judges its deadline."""
    stuck = attached_request("node-3", MODEL, 2)
    stuck["spec"]["resource"]["size"] = 5
    stuck["metadata"]["annotations"] = {names.REQUESTED_AT_ANNOTATION: "2020-01-01T00:00:00Z",
                                        names.PREVIOUS_SIZE_ANNOTATION: "2"}
    node = api.get("nodes", "node-3")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    api.put(node)
    api.put(stuck)
    cdi.fail(OURS, "insufficient number of available nodes")
    obs = cluster().observe()
    assert obs.scenario.node("node-3").gpus == 4  # planned at the size it goes back to
    assert any(f"ComposabilityRequest {OURS}: not complete 300 s after its size became 5" in w for w in obs.warnings)
    cdi.settle()  # the operator keeps trying
    _, outcomes = apply_plan_once(cluster(), execute=True)
    (outcome,) = outcomes
    assert (outcome.job, outcome.action, outcome.result) == ("node-3", "attach", "failed")
    assert outcome.detail == (f"ComposabilityRequest {OURS}: not complete 300 s after its size became 5: status.error: "
                              "insufficient number of available nodes; size rolled back to 2")
    assert cdi.request(OURS)["spec"]["resource"]["size"] == 2


def test_the_webhook_refuses_a_second_request_for_the_node(api, cdi, cluster, fake_time, monkeypatch):
    """Someone else's request already attaches this model to node-3: ours is refused (403), the
    refusal is the step's reason word for word, and theirs is never written."""
    theirs = attached_request("node-3", MODEL, 1, ours=False)
    api.put(theirs)
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train"))
    decision = step(cluster, fake_time)
    assert not decision.can_start
    assert decision.reason.endswith(': admission webhook "vcomposabilityrequest.kb.io" denied the request: '
                                    f"composabilityRequest resource by-hand-node-3 with type gpu and model {MODEL} "
                                    "already exists")
    assert cdi.request(OURS) is None and reservations(api) == []
    assert writes(api, f"{PATH}/by-hand-node-3") == [] and fake_time.sleeps == []  # a refusal is not retried


def test_the_webhook_checks_updates_too(api, cdi, cluster, fake_time):
    api.put(attached_request("node-3", MODEL, 1))
    other = attached_request("node-3", MODEL, 1, ours=False)
    api.put(other)  # made past the webhook (it was down): now both exist
    obs = cluster().observe()
    result = composed_plan(obs.scenario, [Composition("node-3", MODEL, 2)])
    with cluster().planning():
        (outcome,) = cluster().actuator.carry_out(result, obs, Orders(execute=True)).outcomes
    assert outcome.result == "failed" and "already exists" in outcome.detail
    assert cdi.request(OURS)["spec"]["resource"]["size"] == 1


def test_a_webhook_outage_is_retried_within_the_deadline(api, cdi, cluster, fake_time, monkeypatch):
    api.inject(500, method="POST", path=PATH, times=3, message=OUTAGE)
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train"))
    decision = step(cluster, fake_time)
    assert decision.can_start and fake_time.sleeps[:3] == [0.5, 1, 2]  # backing off, then polling
    assert writes(api, PATH) == ["POST"] * 4


def test_a_webhook_outage_past_the_deadline_is_gpu_policy_s_error(api, cdi, cluster, fake_time, monkeypatch):
    api.inject(500, method="POST", path=PATH, times=None, message=OUTAGE)
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train"))
    with pytest.raises(ClusterUnavailable, match=f"k8s://: create ComposabilityRequest {OURS}: the API server answered "
                                                 "500: Internal error occurred: failed calling webhook") as info:
        step(cluster, fake_time, composition_deadline_s=100)
    assert "\n" not in str(info.value) and sum(fake_time.sleeps) <= 100  # 0.5 + 1 + ... + 32, within the deadline
    assert reservations(api) == []  # nothing was promised


def detach(cluster, gpus: int):
    obs = cluster().observe()
    result = composed_plan(obs.scenario, [Composition("node-3", MODEL, -gpus, "idle for 60 min")])
    with cluster().planning():
        return cluster().actuator.carry_out(result, obs, Orders(execute=True)).outcomes


def test_detach_some_by_patch_all_by_delete(api, cdi, cluster):
    api.put(attached_request("node-3", MODEL, 3))
    node = api.get("nodes", "node-3")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "5"
    api.put(node)
    (outcome,) = detach(cluster, 1)
    assert (outcome.action, outcome.result) == ("detach", "requested")
    assert outcome.detail == f"ComposabilityRequest {OURS}, size 3 -> 2: detach 1 {MODEL} from node-3: idle for 60 min"
    cdi.settle()
    assert allocatable(api, "node-3") == 4 and len(cdi.request(OURS)["status"]["resources"]) == 2
    (outcome,) = detach(cluster, 2)
    assert outcome.result == "requested" and writes(api, f"{PATH}/{OURS}") == ["PATCH", "DELETE"]
    states = []
    for _ in range(3):
        states.append((cdi.request(OURS) or {}).get("status", {}).get("state"))
        cdi.reconcile()
    assert states == ["Running", "Cleaning", "Deleting"] and cdi.request(OURS) is None
    assert allocatable(api, "node-3") == 2


def test_foreign_requests_are_read_never_changed(api, cdi, cluster, kubeconfig, capsys, monkeypatch):
    api.put(attached_request("node-1", MODEL, 2, ours=False))  # on a node that is not composable
    monkeypatch.setattr("gpu_policy.actions.cycle.plan", lambda scenario, *a, **k: composed_plan(
        scenario, [Composition("node-3", MODEL, 2)]))
    assert main(["apply", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--execute", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(o["action"], o["result"], o["pods"]) for o in out["outcomes"]] == [("attach", "requested", [OURS])]
    assert writes(api, f"{PATH}/by-hand-node-1") == [] and cdi.request("by-hand-node-1")["spec"]["resource"]["size"] == 2
    assert out["plan"]["compositions"] == [{"node": "node-3", "model": MODEL, "change": 2, "reason": ""}]
    assert out["plan"]["summary"]["attached"] == 2


def test_a_dry_run_writes_nothing(api, cdi, cluster):
    obs = cluster().observe()
    result = composed_plan(obs.scenario, [Composition("node-3", MODEL, 4)])
    api.reset_log()
    (outcome,) = cluster().actuator.carry_out(result, obs, Orders(execute=False)).outcomes
    assert (outcome.result, outcome.detail) == ("dry run", f"ComposabilityRequest {OURS}, size 0 -> 4: "
                                                           f"attach 4 {MODEL} to node-3")
    assert {r.method for r in api.requests} <= {"GET"}


def test_no_composition_without_the_operator_is_a_clear_failure(api, cluster):
    """A plan that composes on a cluster where the CRD went away: the write says so."""
    api.put(composable_node_object(Node(name="node-3", gpus=2, gpu_model=MODEL), max_gpus=8))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("q")], jobs=[])))
    api.put(composable_config_map({"pools": [{"model": MODEL, "free": 6}]}))
    cdi = FakeCdiOperator(api)
    obs = cluster().observe()
    api.resources.pop((names.CRO_GROUP, names.CRO_PLURAL))  # uninstalled between the look and the act
    with cluster().planning():
        (outcome,) = cluster().actuator.carry_out(composed_plan(obs.scenario, [Composition("node-3", MODEL, 1)]), obs,
                                                  Orders(execute=True)).outcomes
    assert outcome.result == "failed" and outcome.detail.endswith(
        "no ComposabilityRequest resource: is the CDI operator (composable-resource-operator) installed?")
    assert cdi.requests() == []


def test_every_request_stays_within_the_declared_permissions(api, cdi, cluster, fake_time, monkeypatch):
    monkeypatch.setattr("gpu_policy.actions.step.plan", attach_for("b/train"))
    step(cluster, fake_time)
    used = {(verb, resource) for verb, group, resource in api.permissions_used() if group == names.CRO_GROUP}
    assert used == {("list", names.CRO_PLURAL), ("create", names.CRO_PLURAL), ("get", names.CRO_PLURAL)}


def test_a_look_with_requests_names_bad_ones_of_ours(api, cdi, cluster):
    bad = attached_request("node-3", MODEL, 1)
    bad["spec"]["resource"]["size"] = "two"
    api.put(bad)
    with pytest.raises(ClusterObjectError, match=f"ComposabilityRequest {OURS}: spec.resource.size: must be a whole "
                                                 "number >= 0, got 'two'"):
        observe(cluster())


def test_an_unreachable_operator_api_is_gpu_policy_s_error(api, cdi, cluster, fake_time):
    api.inject(503, path=PATH, times=None)
    with pytest.raises(ClusterUnavailable, match="list ComposabilityRequests: the API server answered 503"):
        cluster(deadline_s=5).observe()
