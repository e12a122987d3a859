"""DRA, read only (gpu_policy/kubernetes/read/dra.py): ResourceSlices, DeviceClasses,
ResourceClaims and ResourceClaimTemplates as NVIDIA's DRA driver and Kubernetes 1.34 write
them, through the real client: physical GPUs, never devices."""

import json
import time

from gpu_policy import load_scenario
from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Queue, Scenario
from gpu_policy.planner import plan
from tests.conftest import SCENARIOS
from tests.kubernetes.dra_objects import (allocate, claiming, gpu_claim, gpu_class, gpu_device, load_dra, mig_device,
                                          resource_slice, serve_dra, serve_taint_rules, taint_rule)
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map

NOW = 1_800_000_000.0
TEAM = {names.QUEUE_LABEL: "team-a"}
A100 = "NVIDIA A100-SXM4-80GB"


def dra_node(api, name: str = "dra-0") -> None:
    """A node whose GPUs only DRA offers: no nvidia.com/gpu, 4 GPUs in a ResourceSlice, one of
    them partitionable into MIG devices (more devices than GPUs)."""
    obj = node_object(Node(name, 0))
    obj["status"]["allocatable"].pop("nvidia.com/gpu")
    api.put(obj)
    devices = [gpu_device(name, i, A100) for i in range(4)] + [mig_device(name, 3, k, "1g.10gb", A100) for k in range(7)]
    api.put(resource_slice(name, devices))


def cluster_with(api):
    serve_dra(api)
    api.put(gpu_class())
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=4)], jobs=[])))
    dra_node(api)


def look(cluster):
    obs = cluster(clock=lambda: NOW).observe()
    return obs.scenario, obs.warnings


def test_a_dra_only_node_counts_physical_gpus_and_a_pending_claim_starts_there(api, cluster):
    cluster_with(api)
    api.put(gpu_claim("ml", "train-gpus", 2, [f'device.attributes["gpu.nvidia.com"].productName == "{A100}"']))
    api.put(claiming(gpu_pod("ml", "train", labels=TEAM), "train-gpus"))
    scenario, warnings = look(cluster)
    (node,) = scenario.nodes
    assert (node.name, node.gpus, node.gpu_model) == ("dra-0", 4, "NVIDIA-A100-SXM4-80GB")  # 4 GPUs, not 11 devices
    (job,) = scenario.jobs
    assert (job.name, job.gpus, job.gpu_model) == ("ml/train", 2, ["NVIDIA-A100-SXM4-80GB"]) and not warnings
    decided = plan(scenario).job("ml/train")
    assert decided.action == "start" and decided.replicas[0].node == "dra-0"


def run(capsys, *argv) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_an_idle_dra_only_node_is_capacity_before_any_pod_claims_it(api, kubeconfig, capsys):
    """No pod at all: the ResourceSlices' 4 physical GPUs are the cluster's, in `snapshot`, in
    `status`'s fair shares and in a plan; a DRA pod that then waits is started there."""
    cluster_with(api)
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=1), Queue("team-b", deserved=1)],
                                       jobs=[])))
    cluster = ["--cluster", "k8s://", "--kubeconfig", kubeconfig, "--format", "json"]
    api.reset_log()
    snapshot = run(capsys, "snapshot", *cluster)
    assert [(n["name"], n["gpus"]) for n in snapshot["nodes"]] == [("dra-0", 4)]  # 4 GPUs, not 11 devices
    # no claim to read: ResourceSlices and the taint rules that take GPUs out of them (a 404 here), nothing more
    lists = sorted(r.path for r in api.requests if r.path.startswith("/apis/resource.k8s.io/"))
    assert lists == ["/apis/resource.k8s.io/v1/devicetaintrules", "/apis/resource.k8s.io/v1/resourceslices"]
    # a pod asking nvidia.com/gpu that the DRA driver serves (Kubernetes' extended-resource bridge):
    # no claim of its own, so only the slices say where it fits
    api.put(gpu_pod("ml", "classic", gpus=1, labels={names.QUEUE_LABEL: "team-b"}))
    status = run(capsys, "status", *cluster)
    assert {q["name"]: q["fair_share"] for q in status["queues"]} == {"team-a": 0, "team-b": 1}
    assert [(w["name"], w["action"]) for w in status["waiting"]] == [("ml/classic", "start")]

    api.put(gpu_claim("ml", "train-gpus", 3))
    api.put(claiming(gpu_pod("ml", "train", labels=TEAM), "train-gpus"))
    planned = run(capsys, "plan", *cluster)
    assert {j["name"]: (j["action"], [r["node"] for r in j["replicas"]]) for j in planned["jobs"]} == {
        "ml/classic": ("start", ["dra-0"]), "ml/train": ("start", ["dra-0"])}


def test_mig_partitioned_and_partitionable_gpus_count_once_each(api, cluster):
    """A node whose 2 GPUs the driver publishes only as MIG devices (7 each), and a node whose 2
    GPUs are partitionable devices (whole and halves drawing on one counter set per GPU, no
    uuid): 2 physical GPUs each, however many devices, with no pod claiming any."""
    serve_dra(api)
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=4)], jobs=[])))
    for name in ("mig-0", "part-0"):
        obj = node_object(Node(name, 0))
        obj["status"]["allocatable"].pop("nvidia.com/gpu")
        api.put(obj)
    api.put(resource_slice("mig-0", [mig_device("mig-0", g, k, "1g.10gb", A100) for g in range(2) for k in range(7)]))

    def partition(gpu: int, name: str) -> dict:
        return {"name": f"gpu-{gpu}-{name}", "attributes": {"type": {"string": "gpu"}, "productName": {"string": A100}},
                "consumesCounters": [{"counterSet": f"gpu-{gpu}-counters", "counters": {"memory": {"value": "80Gi"}}}]}

    part = resource_slice("part-0", [partition(g, p) for g in range(2) for p in ("whole", "half-0", "half-1")])
    part["spec"]["sharedCounters"] = [{"name": f"gpu-{g}-counters", "counters": {"memory": {"value": "80Gi"}}}
                                      for g in range(2)]
    api.put(part)
    scenario, warnings = look(cluster)
    assert [(n.name, n.gpus, n.gpu_model) for n in scenario.nodes] == [("mig-0", 2, "NVIDIA-A100-SXM4-80GB"),
                                                                      ("part-0", 2, "NVIDIA-A100-SXM4-80GB")]
    assert not warnings


def test_allocated_claims_hold_physical_gpus_and_a_shared_claim_counts_once(api, cluster):
    cluster_with(api)
    api.put(allocate(gpu_claim("ml", "solo-gpus", 1), "dra-0", ["gpu-0"], [("solo", "uid-solo")]))
    shared = allocate(gpu_claim("ml", "pair-gpus", 1), "dra-0", ["gpu-1"], [("pair-a", "uid-a"), ("pair-b", "uid-b")])
    api.put(shared)
    api.put(allocate(gpu_claim("ml", "slices", 2), "dra-0", ["gpu-3-mig-1g.10gb-0", "gpu-3-mig-1g.10gb-1"],
                     [("sliced", "uid-sliced")]))
    for name, claim, uid in (("solo", "solo-gpus", "uid-solo"), ("pair-a", "pair-gpus", "uid-a"),
                             ("pair-b", "pair-gpus", "uid-b"), ("sliced", "slices", "uid-sliced")):
        pod = claiming(gpu_pod("ml", name, node="dra-0", labels=TEAM), claim)
        pod["metadata"]["uid"] = uid
        api.put(pod)
    scenario, _ = look(cluster)
    held = {j.name: j.gpus for j in scenario.jobs}
    # the shared claim once (on its first pod), two MIG devices of one GPU as two eighths of it
    assert held == {"ml/solo": 1, "ml/pair-a": 1, "ml/sliced": 0.25}
    assert plan(scenario).summary["gpus_allocated_before"] == 2.25


def test_incomplete_and_older_pools_are_skipped(api, cluster):
    cluster_with(api)
    old = resource_slice("dra-0", [gpu_device("dra-0", i, A100) for i in range(8)], generation=0)
    api.put(old)  # an older generation: replaced by generation 1's 4 GPUs
    half = resource_slice("dra-1", [gpu_device("dra-1", i, A100) for i in range(4)], count=2)
    obj = node_object(Node("dra-1", 0))
    obj["status"]["allocatable"].pop("nvidia.com/gpu")
    api.put(obj)
    api.put(half)  # one of its two slices published so far
    api.put(claiming(gpu_pod("ml", "p", labels=TEAM), "p-gpus"))
    api.put(gpu_claim("ml", "p-gpus", 1, ["device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"]))
    scenario, warnings = look(cluster)
    assert [(n.name, n.gpus) for n in scenario.nodes] == [("dra-0", 4)]
    assert any("pool gpu.nvidia.com/dra-1: 1 of 2 slices of generation 1" in w for w in warnings)
    assert any("is counted, not interpreted" in w for w in warnings)


def test_a_claim_made_from_a_template_is_read_from_the_template_until_it_exists(api, cluster):
    cluster_with(api)
    api.put({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": "two-gpus", "namespace": "ml"},
             "spec": {"spec": gpu_claim("ml", "x", 2)["spec"]}})
    pod = gpu_pod("ml", "templated", labels=TEAM)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    api.put(pod)
    (job,) = look(cluster)[0].jobs
    assert job.gpus == 2


def test_the_dra_scenario_file_is_what_the_dra_cluster_snapshots(api, cluster):
    """tests/scenarios/dra-cluster.yaml loaded as a DRA-only cluster reads back as itself."""
    original = load_scenario(SCENARIOS / "dra-cluster.yaml")
    load_dra(api, original, time.time())
    api.reset_log()
    obs = cluster(clock=time.time).observe()
    got = {j.name.removeprefix("jobs/"): (j.gpus, j.replicas, j.running) for j in obs.scenario.jobs}
    assert got == {j.name: (j.gpus, j.replicas, j.running) for j in original.jobs}
    assert [(n.name, n.gpus) for n in obs.scenario.nodes] == [(n.name, n.gpus) for n in original.nodes]
    lists = sorted(r.path for r in api.requests if r.path.startswith("/apis/resource.k8s.io/"))
    # one LIST per kind (DeviceTaintRules: a 404 from a 1.34 API server); no template is needed
    assert lists == ["/apis/resource.k8s.io/v1/deviceclasses", "/apis/resource.k8s.io/v1/devicetaintrules",
                     "/apis/resource.k8s.io/v1/resourceclaims", "/apis/resource.k8s.io/v1/resourceslices"]
    assert {d.name.removeprefix("jobs/"): d.action for d in plan(obs.scenario).jobs} == original.expect["jobs"]


def test_a_gpu_claim_and_a_gpu_limit_together_count_both_once_each(api, cluster):
    """A pod that asks for nvidia.com/gpu on a device-plugin node and for a DRA GPU too: both."""
    cluster_with(api)
    api.put(node_object(Node("plugin-0", 4)))
    api.put(allocate(gpu_claim("ml", "extra", 1), "dra-0", ["gpu-2"], [("both", "uid-both")]))
    pod = gpu_pod("ml", "both", gpus=1, node="dra-0", labels=TEAM)
    pod["metadata"]["uid"] = "uid-both"
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "extra"}]
    api.put(pod)
    (job,) = look(cluster)[0].jobs
    assert job.gpus == 2


def test_allocation_mode_all_counts_a_node_and_a_bridged_claim_is_not_counted_twice(api, cluster):
    cluster_with(api)
    whole = gpu_claim("ml", "whole-node", 1)
    whole["spec"]["devices"]["requests"][0]["exactly"] = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}
    api.put(whole)
    api.put(claiming(gpu_pod("ml", "everything", labels=TEAM), "whole-node"))
    # the scheduler's claim for a pod's nvidia.com/gpu request (the extended-resource bridge)
    bridged = allocate(gpu_claim("ml", "classic-extended-resources-x", 1), "dra-0", ["gpu-0"], [("classic", "uid-c")])
    bridged["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    api.put(bridged)
    classic = gpu_pod("ml", "classic", gpus=1, node="dra-0", labels=TEAM)
    classic["metadata"]["uid"] = "uid-c"
    classic["spec"]["resourceClaims"] = [{"name": "x", "resourceClaimName": "classic-extended-resources-x"}]
    api.put(classic)
    scenario, warnings = look(cluster)
    got = {j.name: j.gpus for j in scenario.jobs}
    assert got == {"ml/everything": 4, "ml/classic": 1}  # the limit once, not the limit and the claim
    assert any("allocationMode All is counted as a whole node's GPUs (4)" in w for w in warnings)


def test_tainted_devices_take_no_new_work_from_the_slice_or_a_device_taint_rule(api, cluster):
    """Kubernetes 1.37: the driver taints gpu-1 in its slice; a DeviceTaintRule taints gpu-2 by
    pool and device name; a rule with effect None and a rule without a selector taint nothing."""
    serve_dra(api)
    serve_taint_rules(api)
    api.put(gpu_class())
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=4)], jobs=[])))
    obj = node_object(Node("dra-0", 0))
    obj["status"]["allocatable"].pop("nvidia.com/gpu")
    api.put(obj)
    devices = [gpu_device("dra-0", i, A100) for i in range(4)]
    devices[1]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule",
                             "timeAdded": "2026-11-26T07:00:00Z"}]
    api.put(resource_slice("dra-0", devices))
    api.put(taint_rule("drain-gpu-2", {"driver": "gpu.nvidia.com", "pool": "dra-0", "device": "gpu-2"}))
    api.put(taint_rule("just-saying", {"pool": "dra-0"}, effect="None"))
    api.put(taint_rule("no-selector", None))
    api.put(claiming(gpu_pod("ml", "wide", labels=TEAM), "wide-gpus"))
    api.put(gpu_claim("ml", "wide-gpus", 3))
    scenario, warnings = look(cluster)
    (node,) = scenario.nodes
    assert (node.gpus, node.unhealthy_gpus) == (4, [1, 2]) and not warnings
    assert plan(scenario).job("ml/wide").action == "wait"  # 3 GPUs asked, 2 untainted
    api.delete("devicetaintrules", "drain-gpu-2", group="resource.k8s.io")
    assert plan(look(cluster)[0]).job("ml/wide").action == "start"


def test_a_rule_gpu_policy_cannot_read_is_not_applied_and_noexecute_names_the_pods_it_evicts(api, cluster):
    cluster_with(api)
    serve_taint_rules(api)
    # the alpha API's CEL selector (Kubernetes 1.33, 1.34): not interpreted
    api.put(taint_rule("by-cel", {"driver": "gpu.nvidia.com", "selectors": [
        {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].uuid == "GPU-dra-0-0"'}}]}))
    api.put(taint_rule("evict-gpu-0", {"device": "gpu-0"}, key="maintenance", effect="NoExecute"))
    api.put(allocate(gpu_claim("ml", "a-gpus", 1), "dra-0", ["gpu-0"], [("a", "uid-a")]))
    tolerant = allocate(gpu_claim("ml", "b-gpus", 1), "dra-0", ["gpu-0"], [("b", "uid-b")])
    tolerant["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]
    api.put(tolerant)
    for name in ("a", "b"):
        pod = claiming(gpu_pod("ml", name, node="dra-0", labels=TEAM), f"{name}-gpus")
        pod["metadata"]["uid"] = f"uid-{name}"
        api.put(pod)
    scenario, warnings = look(cluster)
    assert scenario.nodes[0].unhealthy_gpus == [0]
    assert any(w == "DeviceTaintRule by-cel: spec.deviceSelector.selectors is not interpreted: the rule is not "
               "applied" for w in warnings)
    evicts = [w for w in warnings if "Kubernetes evicts it" in w]
    assert evicts == ["pod ml/a: its claim a-gpus holds device gpu-0 tainted maintenance:NoExecute, which it does "
                      "not tolerate: Kubernetes evicts it"]


def test_a_device_taint_rule_of_the_wrong_shape_is_left_out_naming_it(api, cluster):
    cluster_with(api)
    serve_taint_rules(api)
    api.put(taint_rule("odd", {"device": ["gpu-0"]}))
    api.put(claiming(gpu_pod("ml", "p", labels=TEAM), "p-gpus"))
    api.put(gpu_claim("ml", "p-gpus", 1))
    scenario, warnings = look(cluster)
    assert scenario.nodes[0].unhealthy_gpus == []
    assert any("DeviceTaintRule odd" in w and "spec.deviceSelector.device" in w for w in warnings)


def test_a_released_dra_pod_holds_its_claims_gpus_until_the_scheduler_binds_it(api, cluster):
    """Released onto dra-0 (the gate gone, the hostname selected) and not bound yet: its claim is
    not allocated, yet its 4 GPUs are taken there, so the next pod is not released onto them."""
    cluster_with(api)
    for name in ("released", "next"):
        api.put(gpu_claim("ml", f"{name}-gpus", 4))
    api.put(claiming(gpu_pod("ml", "released", labels=TEAM, nodeSelector={names.HOSTNAME_LABEL: "dra-0"}),
                     "released-gpus"))
    api.put(claiming(gpu_pod("ml", "next", labels=TEAM), "next-gpus"))
    scenario, _ = look(cluster)
    jobs = {j.name: j for j in scenario.jobs}
    assert (jobs["ml/released"].gpus, jobs["ml/released"].running) == (4, ["dra-0"])
    assert plan(scenario).job("ml/next").action == "wait"
