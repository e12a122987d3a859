"""Physical GPUs behind what nodes advertise: GPUs shared by time-slicing or MPS
(gpu_policy/kubernetes/read/devices.py), as NVIDIA's device plugin and GPU feature discovery
present them, read through the real client from the fake API server."""

import pytest

from gpu_policy.kubernetes import names
from gpu_policy.model import GpuSharing, Node, Queue, Scenario
from gpu_policy.planner import plan
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map

NOW = 1_800_000_000.0
TEAM = {names.QUEUE_LABEL: "team-a"}


@pytest.fixture
def shared(api):
    """The issue's node: 8 T4s time-sliced 4 ways (32 nvidia.com/gpu), and a node of 8 whole ones."""
    api.put(node_object(Node("shared-0", 8, "Tesla-T4", gpu_sharing=GpuSharing("time-slicing", 4))))
    api.put(node_object(Node("whole-0", 8, "Tesla-T4")))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=16)], jobs=[])))
    return api


def look(cluster):
    obs = cluster(clock=lambda: NOW).observe()
    return obs.scenario, obs.warnings


def test_a_node_shared_four_ways_counts_its_physical_gpus(shared, cluster):
    node = shared.get("nodes", "shared-0")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "32"  # what the device plugin advertises
    scenario, _ = look(cluster)
    got = {n.name: n for n in scenario.nodes}
    assert got["shared-0"].gpus == 8 and got["shared-0"].gpu_sharing == GpuSharing("time-slicing", 4)
    assert got["shared-0"].gpu_model == "Tesla-T4"  # GFD's -SHARED mark dropped: one model
    assert scenario.gpus_total == 16
    assert plan(scenario).summary["gpus_total"] == 16


def test_pods_on_a_shared_node_hold_their_replicas_as_fractions(shared, cluster):
    shared.put(gpu_pod("ml", "one-replica", gpus=1, node="shared-0", labels=TEAM))
    shared.put(gpu_pod("ml", "two-replicas", gpus=2, node="shared-0", labels=TEAM))
    shared.put(gpu_pod("ml", "whole-gpu", gpus=1, node="whole-0", labels=TEAM))
    shared.put(gpu_pod("ml", "all-four", gpus=4, node="shared-0", labels=TEAM))
    scenario, warnings = look(cluster)
    got = {j.name: j for j in scenario.jobs}
    assert got["ml/one-replica"].gpus == 0.25 and got["ml/two-replicas"].gpus == 0.5
    assert got["ml/whole-gpu"].gpus == 1
    # four replicas may span four GPUs: not a fraction gpu-policy can plan, so unmanaged, held whole
    assert got["ml/all-four"].queue == names.UNMANAGED_QUEUE and got["ml/all-four"].gpus == 1
    assert any("ml/all-four holds 4 replicas of GPUs shared 4 ways" in w for w in warnings)


def test_a_waiting_pod_asking_for_the_renamed_shared_resource_is_a_fraction(api, cluster):
    node = node_object(Node("shared-0", 2, "Tesla-T4", gpu_sharing=GpuSharing("mps", 4)))
    allocatable = node["status"]["allocatable"]
    allocatable["nvidia.com/gpu.shared"] = allocatable.pop("nvidia.com/gpu")  # renameByDefault: true
    api.put(node)
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=2)], jobs=[])))
    pod = gpu_pod("ml", "notebook", gpus=None, labels=TEAM)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu.shared": "1"}}
    api.put(pod)
    scenario, warnings = look(cluster)
    assert scenario.nodes[0].gpus == 2 and scenario.nodes[0].gpu_sharing == GpuSharing("mps", 4)
    (job,) = scenario.jobs
    assert job.gpus == 0.25 and job.queue == "team-a" and not warnings
    decided = plan(scenario).job("ml/notebook")
    assert decided.action == "start" and decided.replicas[0].node == "shared-0"


def test_whole_gpu_work_never_lands_on_shared_gpus(shared, cluster):
    shared.put(gpu_pod("ml", "eight", gpus=8, labels=TEAM))
    shared.put(gpu_pod("ml", "also-eight", gpus=8, labels=TEAM))
    result = plan(look(cluster)[0])
    actions = sorted((j.action, [r.node for r in j.replicas]) for j in result.jobs)
    assert actions == [("start", ["whole-0"]), ("wait", [])]


def test_a_bad_replicas_label_names_the_node_and_the_label(api, cluster):
    node = node_object(Node("shared-0", 2, gpu_sharing=GpuSharing("time-slicing", 4)))
    node["metadata"]["labels"]["nvidia.com/gpu.replicas"] = "four"
    api.put(node)
    (warning,) = cluster().observe().object_warnings  # the node is left out, the rest planned
    assert warning.line().startswith("node shared-0: metadata.labels.nvidia.com/gpu.replicas: "
                                     'must be a whole number from 1 to 1,024, got "four"')


@pytest.fixture
def mig(api):
    """Two A100-80GB GPUs cut into 14 slices of 1g.10gb, as the device plugin's mixed strategy
    and GFD show them (nvidia.com/gpu.memory in MiB)."""
    node = node_object(Node("mig-0", 2, "NVIDIA-A100-SXM4-80GB", mig={"1g.10gb": 14}))
    node["metadata"]["labels"].update({"nvidia.com/gpu.memory": "81920", "nvidia.com/mig.config": "all-1g.10gb"})
    api.put(node)
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=2)], jobs=[])))
    return api


def slice_pod(name: str, node: str | None = None, slices: int = 1) -> dict:
    pod = gpu_pod("ml", name, gpus=None, node=node, labels=TEAM)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": str(slices)}}
    return pod


def test_a_mig_node_counts_its_physical_gpus_and_its_pods_their_slices(mig, cluster):
    mig.put(slice_pod("running", node="mig-0"))
    mig.put(slice_pod("waiting"))
    scenario, warnings = look(cluster)
    (node,) = scenario.nodes
    assert (node.gpus, node.mig) == (2, {"1g.10gb": 14}) and not warnings
    got = {j.name: j for j in scenario.jobs}
    assert {n: (j.gpus, j.mig_profile) for n, j in got.items()} == {"ml/running": (0.125, "1g.10gb"),
                                                                    "ml/waiting": (0.125, "1g.10gb")}
    result = plan(scenario)
    assert result.job("ml/waiting").action == "start" and result.job("ml/waiting").replicas[0].node == "mig-0"
    assert result.summary["gpus_total"] == 2


def test_a_mig_slice_request_waits_where_no_slice_is_free(mig, cluster):
    for i in range(14):
        mig.put(slice_pod(f"held-{i}", node="mig-0"))
    mig.put(slice_pod("one-more"))
    decided = plan(look(cluster)[0]).job("ml/one-more")
    assert decided.action == "wait" and decided.reason == "needs 1 MIG slice of 1g.10gb; 0 free after this plan"


def test_a_pod_asking_for_two_slices_is_unmanaged_with_a_warning(mig, cluster):
    mig.put(slice_pod("two", node="mig-0", slices=2))
    scenario, warnings = look(cluster)
    assert scenario.jobs == []  # unmanaged; its slices are not counted (docs/kubernetes.md, "MIG")
    assert any("ml/two asks for 2 MIG slices of 1g.10gb: one slice per pod is planned" in w for w in warnings)


@pytest.fixture
def mig_single(api):
    """Two A100-80GB GPUs cut into 1g.10gb slices under the device plugin's `single` strategy:
    the 14 slices advertised as nvidia.com/gpu, and GFD's product, count and memory overridden
    with the slices' (NVIDIA/gpu-feature-discovery README, "MIG 'single' strategy")."""
    node = node_object(Node("single-0", 14))
    node["metadata"]["labels"].update({
        "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        "nvidia.com/gpu.count": "14", "nvidia.com/gpu.memory": "9728", "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/gpu.slices.gi": "1", "nvidia.com/gpu.slices.ci": "1"})
    api.put(node)
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=2)], jobs=[])))
    return api


def test_a_single_strategy_mig_node_is_read_as_slices(mig_single, cluster):
    for i in range(13):
        mig_single.put(gpu_pod("ml", f"held-{i}", gpus=1, node="single-0", labels=TEAM))
    product = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    mig_single.put(gpu_pod("ml", "next", gpus=1, labels=TEAM, nodeSelector=product))
    mig_single.put(gpu_pod("ml", "after", gpus=1, labels=TEAM, nodeSelector=product))
    scenario, warnings = look(cluster)
    (node,) = scenario.nodes
    assert (node.gpus, node.mig, node.gpu_model) == (2, {"1g.10gb": 14}, "NVIDIA-A100-SXM4-80GB") and not warnings
    jobs = {j.name: j for j in scenario.jobs}
    assert {(j.gpus, j.mig_profile) for j in jobs.values()} == {(0.125, "1g.10gb")}
    assert jobs["ml/next"].gpu_model == ["NVIDIA-A100-SXM4-80GB"]
    result = plan(scenario)
    assert sorted(result.job(f"ml/{n}").action for n in ("next", "after")) == ["start", "wait"]  # 14 slices, 13 held
    assert result.summary["gpus_total"] == 2
