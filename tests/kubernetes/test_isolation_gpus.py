"""The fields issue 27 reads (GPU sharing and MIG labels and resources, DRA objects, PodGroups)
are isolated per object like every other: an odd value leaves that one object out with a
warning naming it and the field, never a traceback, and the rest is planned."""

import pytest

from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Queue, Scenario
from tests.kubernetes.dra_objects import claiming, gpu_claim, gpu_class, gpu_device, resource_slice, serve_dra
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map
from tests.kubernetes.test_isolation import LEFT_OUT, changed

TEAM = {names.QUEUE_LABEL: "team-a"}
A100 = "NVIDIA A100-SXM4-80GB"


@pytest.fixture
def base(api):
    api.put(node_object(Node(name="n", gpus=8, cpu=64, memory_gib=512)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=8)], jobs=[])))
    api.put(gpu_pod("ml", "fine", labels=TEAM))
    return api


def odd_node(**change) -> dict:
    return changed(node_object(Node(name="odd", gpus=8)), change)


MIG = "nvidia.com/mig-1g.10gb"


@pytest.mark.parametrize("node,line", [
    (odd_node(metadata__labels={"nvidia.com/gpu.replicas": "9" * 5000}),
     'node odd: metadata.labels.nvidia.com/gpu.replicas: must be a whole number from 1 to 1,024, '
     f'got "{"9" * 80}...": {LEFT_OUT}'),
    (odd_node(status__allocatable={"nvidia.com/gpu": "0", MIG: "9" * 5000}),
     f'node odd: status.allocatable.{MIG}: must be a whole number of MIG slices from 0 to 8,192, '
     f'got "{"9" * 80}...": {LEFT_OUT}'),
    (odd_node(status__allocatable={"nvidia.com/gpu": "0", MIG: "1.5"}),
     f'node odd: status.allocatable.{MIG}: must be a whole number of MIG slices from 0 to 8,192, '
     f'got "1.5": {LEFT_OUT}'),
    (odd_node(status__allocatable={"nvidia.com/gpu": "0", "nvidia.com/mig-1g 10gb": "7"}),
     'node odd: status.allocatable: MIG slices 1g 10gb: must be a MIG profile name such as 1g.10gb, '
     f'got "1g 10gb": {LEFT_OUT}'),
    (odd_node(metadata__labels={"nvidia.com/gpu.count": "5000"}, status__allocatable={"nvidia.com/gpu": "0", MIG: "7"}),
     f"node odd: status.allocatable.nvidia.com/gpu: must be a whole number from 0 to 1,024 physical GPUs, "
     f"got 5000: {LEFT_OUT}"),
], ids=lambda v: v[:60] if isinstance(v, str) else None)
def test_an_odd_gpu_node_is_left_out_and_the_rest_planned(base, cluster, node, line):
    base.put(node)
    observation = cluster().observe()
    assert [w.line() for w in observation.object_warnings] == [line]
    assert [n.name for n in observation.scenario.nodes] == ["n"]
    assert [j.name for j in observation.scenario.jobs] == ["ml/fine"]


def test_huge_gpu_memory_and_count_labels_are_not_read(base, cluster):
    """Digits beyond any GPU are ignored (no 5,000-digit int), and the node is counted from its slices."""
    base.put(odd_node(metadata__labels={"nvidia.com/gpu.count": "9" * 5000, "nvidia.com/gpu.memory": "9" * 5000,
                                        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                      status__allocatable={"nvidia.com/gpu": "0", MIG: "8"}))
    observation = cluster().observe()
    assert observation.object_warnings == []
    odd = next(n for n in observation.scenario.nodes if n.name == "odd")
    assert (odd.gpus, odd.mig) == (1, {"1g.10gb": 8})  # 8 slices of 1/8 of an 80 GB GPU


def test_a_pod_asking_for_an_odd_mig_resource_is_left_out(base, cluster):
    pod = gpu_pod("ml", "odd", labels=TEAM)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g 10gb": "1"}}
    base.put(pod)
    observation = cluster().observe()
    assert [w.line() for w in observation.object_warnings] == [
        'pod ml/odd: spec.containers[*].resources: the resource "nvidia.com/mig-1g 10gb": its must be a MIG profile '
        f'name such as 1g.10gb, got "1g 10gb": {LEFT_OUT}']
    assert [j.name for j in observation.scenario.jobs] == ["ml/fine"]


def test_a_pod_with_resource_claims_of_the_wrong_type_is_left_out(base, cluster):
    pod = gpu_pod("ml", "odd", labels=TEAM)
    pod["spec"]["resourceClaims"] = "gpus"
    base.put(pod)
    observation = cluster().observe()
    assert [w.line() for w in observation.object_warnings] == [
        f'pod ml/odd: spec.resourceClaims: must be a list, got "gpus": {LEFT_OUT}']


def dra_cluster(api) -> None:
    serve_dra(api)
    api.put(gpu_class())
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=8)], jobs=[])))
    for name in ("dra-0", "dra-1"):
        obj = node_object(Node(name, 0))
        obj["status"]["allocatable"].pop("nvidia.com/gpu")
        api.put(obj)
    api.put(resource_slice("dra-0", [gpu_device("dra-0", i, A100) for i in range(4)]))


def test_an_odd_resource_slice_is_left_out_and_the_other_counted(api, cluster):
    dra_cluster(api)
    odd = resource_slice("dra-1", [gpu_device("dra-1", i, A100) for i in range(4)])
    odd["spec"]["pool"]["generation"] = "1"
    api.put(odd)
    api.put(gpu_claim("ml", "train-gpus", 2))
    api.put(claiming(gpu_pod("ml", "train", labels=TEAM), "train-gpus"))
    observation = cluster().observe()
    assert [w.line() for w in observation.object_warnings] == [
        f'ResourceSlice dra-1-gpu.nvidia.com-g1-0: spec.pool.generation: must be a whole number, got "1": {LEFT_OUT}']
    assert [(n.name, n.gpus) for n in observation.scenario.nodes] == [("dra-0", 4)]
    assert [(j.name, j.gpus) for j in observation.scenario.jobs] == [("ml/train", 2)]


@pytest.mark.parametrize("count", [10 ** 30, -3])
def test_a_claim_asking_for_a_count_beyond_any_node_is_not_counted(api, cluster, count):
    dra_cluster(api)
    api.put(gpu_claim("ml", "train-gpus", count))
    api.put(claiming(gpu_pod("ml", "train", labels=TEAM), "train-gpus"))
    observation = cluster().observe()
    assert any("ml/train: a claim asks for" in w and "not counted" in w for w in observation.warnings)
    assert observation.scenario.jobs == []


def test_an_odd_resource_claim_is_left_out(api, cluster):
    dra_cluster(api)
    claim = gpu_claim("ml", "train-gpus", 2)
    claim["spec"]["devices"]["requests"] = {"name": "gpus"}
    api.put(claim)
    api.put(claiming(gpu_pod("ml", "train", labels=TEAM), "train-gpus"))
    observation = cluster().observe()
    assert [w.line() for w in observation.object_warnings] == [
        "ResourceClaim ml/train-gpus: spec.devices.requests: must be a list, got {'name': 'gpus'}: " + LEFT_OUT]
    assert any("its claim train-gpus does not exist yet" in w for w in observation.warnings)


def test_an_odd_pod_group_is_left_out(api, cluster):
    api.add_resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True)
    api.put(node_object(Node(name="n", gpus=8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=8)], jobs=[])))
    api.put({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": "2"}})
    for i in range(2):
        api.put(gpu_pod("ml", f"w-{i}", labels=TEAM, annotations={"scheduling.k8s.io/group-name": "pg"}))
    observation = cluster().observe()
    assert [w.line() for w in observation.object_warnings] == [
        f'PodGroup (scheduling.volcano.sh) ml/pg: spec.minMember: must be a whole number, got "2": {LEFT_OUT}']
    assert sorted(j.name for j in observation.scenario.jobs) == ["ml/w-0", "ml/w-1"]  # no gang without its size
