"""The contract's reading rules one by one: cluster objects -> scenario (docs/kubernetes.md)."""

import json

import pytest

from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.reservations import Reservation
from gpu_policy.model import Node, Queue, Scenario
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map, rfc3339

NOW = 1_800_000_000.0
QUEUES = [Queue("team-a", deserved=8), Queue("team-b", deserved=8)]


@pytest.fixture
def seeded(api):
    """Two 8-GPU nodes and the queues ConfigMap with team-a and team-b."""
    for name in ("node-1", "node-2"):
        api.put(node_object(Node(name=name, gpus=8, cpu=64, memory_gib=512)))
    api.put(queues_config_map(Scenario(nodes=[], queues=QUEUES, jobs=[])))
    return api


def look(cluster):
    obs = cluster(clock=lambda: NOW).observe()
    return obs.scenario, obs.warnings


def jobs(scenario):
    return {j.name: j for j in scenario.jobs}


def queue_label(q):
    return {names.QUEUE_LABEL: q}


def test_gang_by_job_label(seeded, cluster):
    for r in range(3):
        seeded.put(gpu_pod("ml", f"train-{r}", gpus=2, node="node-1" if r < 3 else None,
                           labels={**queue_label("team-a"), names.JOB_LABEL: "train"}))
    (job,) = look(cluster)[0].jobs
    assert (job.name, job.replicas, job.gpus, job.running) == ("ml/train", 3, 2, ["node-1"] * 3)


def test_a_controller_alone_makes_no_gang(seeded, cluster):
    """Pods of one controller are independent jobs unless the workload says it is a gang
    (tests/kubernetes/test_workloads.py has each kind)."""
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": "bert", "uid": "u1", "controller": True}]
    other = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "not-a-controller", "uid": "u2"}]
    for r in range(2):
        pod = gpu_pod("ml", f"bert-x{r}", gpus=1, labels=queue_label("team-a"))
        pod["metadata"]["ownerReferences"] = owner
        seeded.put(pod)
    alone = gpu_pod("ml", "notebook", gpus=1, labels=queue_label("team-b"))
    alone["metadata"]["ownerReferences"] = other
    seeded.put(alone)
    got = jobs(look(cluster)[0])
    assert sorted(got) == ["ml/bert-x0", "ml/bert-x1", "ml/notebook"]
    assert all(j.replicas == 1 and j.running == [] for j in got.values())
    assert got["ml/notebook"].queue == "team-b"


def test_fractions_and_gpu_indices(seeded, cluster):
    seeded.put(gpu_pod("ml", "half", gpus=None, node="node-1", labels=queue_label("team-a"),
                       annotations={names.FRACTION_ANNOTATION: "0.5", names.GPU_INDEX_ANNOTATION: "3"}))
    seeded.put(gpu_pod("ml", "quarter", gpus=None, labels=queue_label("team-a"),
                       annotations={names.KAI_FRACTION_ANNOTATION: "0.25"}))
    got = jobs(look(cluster)[0])
    assert (got["ml/half"].gpus, got["ml/half"].gpu_indices) == (0.5, [[3]])
    assert got["ml/quarter"].gpus == 0.25 and got["ml/quarter"].running == []


def test_queue_from_kai_label_namespace_label_and_namespace_name(seeded, cluster):
    seeded.put({"kind": "Namespace", "metadata": {"name": "vision", "labels": queue_label("team-b")}})
    seeded.put({"kind": "Namespace", "metadata": {"name": "team-a"}})
    seeded.put(gpu_pod("nlp", "kai", labels={names.KAI_QUEUE_LABEL: "team-b"}))
    seeded.put(gpu_pod("vision", "by-namespace-label"))
    seeded.put(gpu_pod("team-a", "by-namespace-name"))
    seeded.put(gpu_pod("x", "both", labels={**queue_label("team-a"), names.KAI_QUEUE_LABEL: "team-b"}))
    got = jobs(look(cluster)[0])
    assert {n: j.queue for n, j in got.items()} == {"nlp/kai": "team-b", "vision/by-namespace-label": "team-b",
                                                    "team-a/by-namespace-name": "team-a", "x/both": "team-a"}
    assert seeded.calls("/api/v1/namespaces", "GET") == 1


def test_namespaces_are_listed_only_when_needed(seeded, cluster):
    seeded.put(gpu_pod("ml", "labelled", labels=queue_label("team-a")))
    look(cluster)
    assert seeded.calls("/api/v1/namespaces") == 0


def test_unmanaged_pods_hold_gpus_and_warn_once_per_namespace(seeded, cluster):
    seeded.put(gpu_pod("lab", "u1", gpus=2, node="node-1"))
    seeded.put(gpu_pod("lab", "u2", gpus=3, node="node-2"))
    seeded.put(gpu_pod("lab", "u3", gpus=1))  # pending: holds nothing
    seeded.put(gpu_pod("etl", "bad-queue", gpus=1, node="node-2", labels=queue_label("nope")))
    scenario, warnings = look(cluster)
    unmanaged = [j for j in scenario.jobs if j.queue == names.UNMANAGED_QUEUE]
    assert sorted((j.name, j.gpus, j.preemptible) for j in unmanaged) == [
        ("etl/bad-queue", 1, False), ("lab/u1", 2, False), ("lab/u2", 3, False)]
    assert scenario.queue(names.UNMANAGED_QUEUE).deserved == 6 == scenario.queue(names.UNMANAGED_QUEUE).limit
    assert warnings == [
        "namespace etl: 1 GPU pod with queue 'nope', which does not exist: unmanaged, 1 GPUs counted as used "
        "and never touched",
        "namespace lab: 3 GPU pods with no queue (label gpu-policy.io/queue or kai.scheduler/queue, on the pod or its "
        "namespace): unmanaged, 5 GPUs counted as used and never touched"]


def test_a_pod_with_an_unknown_gpu_resource_is_unmanaged(seeded, cluster):
    pod = gpu_pod("ml", "amd", gpus=None, node="node-1", labels=queue_label("team-a"))
    pod["spec"]["containers"][0]["resources"] = {"limits": {"amd.com/gpu": "1"}}
    seeded.put(pod)
    scenario, warnings = look(cluster)
    assert warnings == ["pod ml/amd asks for amd.com/gpu, not nvidia.com/gpu: counted as unmanaged"]
    assert [j.name for j in scenario.jobs] == []  # it holds none of the GPUs planned here


def test_terminating_pods_hold_their_gpus_without_moving_fair_shares(seeded, cluster):
    pod = gpu_pod("ml", "going", gpus=4, node="node-1", labels=queue_label("team-a"))
    pod["metadata"]["deletionTimestamp"] = rfc3339(NOW)
    seeded.put(pod)
    scenario, _ = look(cluster)
    (job,) = scenario.jobs
    assert (job.name, job.queue, job.running, job.preemptible) == ("ml/going", names.TERMINATING_QUEUE, ["node-1"], False)
    q = scenario.queue(names.TERMINATING_QUEUE)
    assert (q.deserved, q.over_quota_weight) == (0, 0)


@pytest.mark.parametrize("change,reason", [
    (lambda n: n["spec"].update(unschedulable=True), "unschedulable"),
    (lambda n: n["status"].update(conditions=[{"type": "Ready", "status": "Unknown"}]), "not-ready"),
])
def test_nodes_that_take_no_new_work_keep_their_jobs(seeded, cluster, change, reason):
    node = seeded.get("nodes", "node-2")
    change(node)
    seeded.put(node)
    seeded.put(gpu_pod("ml", "stays", gpus=2, node="node-2", labels=queue_label("team-a")))
    scenario, _ = look(cluster)
    node = scenario.node("node-2")
    assert node.unhealthy_gpus == list(range(8)) and node.labels == {names.NO_NEW_WORK_LABEL: reason}
    assert scenario.node("node-1").unhealthy_gpus == [] and scenario.node("node-1").labels == {}
    from gpu_policy import plan
    assert plan(scenario).job("ml/stays").action == "keep"


def test_the_gpu_taint_alone_does_not_stop_new_work(seeded, cluster):
    assert look(cluster)[0].node("node-1").unhealthy_gpus == []  # node_object carries nvidia.com/gpu:NoSchedule


def test_gpu_model_from_node_labels_and_pod_selectors(api, cluster):
    api.put(node_object(Node(name="h", gpus=8, gpu_model="NVIDIA-H100-80GB-HBM3")))
    api.put(node_object(Node(name="a", gpus=8, gpu_model="NVIDIA-A100-SXM4-80GB")))
    api.put(queues_config_map(Scenario(nodes=[], queues=QUEUES, jobs=[])))
    api.put(gpu_pod("ml", "sel", labels=queue_label("team-a"),
                    nodeSelector={names.GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}))
    api.put(gpu_pod("ml", "aff", labels=queue_label("team-a"), affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": names.GPU_PRODUCT_LABEL, "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]},
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}))
    scenario, _ = look(cluster)
    assert {n.name: n.gpu_model for n in scenario.nodes} == {"a": "NVIDIA-A100-SXM4-80GB", "h": "NVIDIA-H100-80GB-HBM3"}
    got = jobs(scenario)
    assert got["ml/sel"].gpu_model == ["NVIDIA-H100-80GB-HBM3"] and got["ml/aff"].gpu_model == ["NVIDIA-A100-SXM4-80GB"]


def test_effective_requests_count_init_containers_and_limits(seeded, cluster):
    pod = gpu_pod("ml", "init", gpus=None, labels=queue_label("team-a"))
    pod["spec"]["containers"] = [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}}},
        {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "500m", "memory": "8Gi"},
                                    "limits": {"nvidia.com/gpu": "1"}}}]
    pod["spec"]["initContainers"] = [{"name": "warm", "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "1"}}}]
    seeded.put(pod)
    (job,) = look(cluster)[0].jobs
    assert (job.gpus, job.cpu, job.memory_gib) == (4, 2.5, 8)


def test_priority_preemptible_checkpoint_and_submission(seeded, cluster):
    seeded.put(gpu_pod("ml", "serve", labels=queue_label("team-a"), priority=125))
    seeded.put(gpu_pod("ml", "build", labels={**queue_label("team-a"), names.PREEMPTIBLE_LABEL: "true"}, priority=100))
    ckpt = gpu_pod("ml", "train", node="node-1", labels=queue_label("team-a"),
                   annotations={names.LAST_CHECKPOINT_ANNOTATION: rfc3339(NOW - 900)})
    ckpt["metadata"]["creationTimestamp"] = rfc3339(NOW - 3600)
    seeded.put(ckpt)
    seeded.put(gpu_pod("ml", "plain", labels=queue_label("team-a")))
    got = jobs(look(cluster)[0])
    assert (got["ml/serve"].priority, got["ml/serve"].is_preemptible) == (125, False)
    assert (got["ml/build"].priority, got["ml/build"].is_preemptible) == (100, True)
    assert (got["ml/train"].checkpoint_age_s, got["ml/train"].submitted_at) == (900, NOW - 3600)
    assert (got["ml/plain"].priority, got["ml/plain"].checkpoint_age_s) == (0, None)


def test_non_gpu_pods_use_node_cpu_and_memory(seeded, cluster):
    daemon = gpu_pod("kube-system", "exporter", gpus=None, node="node-1")
    daemon["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4", "memory": "16Gi"}}
    seeded.put(daemon)
    scenario, _ = look(cluster)
    assert (scenario.node("node-1").cpu, scenario.node("node-1").memory_gib) == (60, 496)
    assert (scenario.node("node-2").cpu, scenario.node("node-2").memory_gib) == (64, 512)
    assert scenario.jobs == []


def test_nodes_without_gpus_are_left_out(seeded, cluster):
    seeded.put(node_object(Node(name="cpu-only", gpus=0)))
    assert [n.name for n in look(cluster)[0].nodes] == ["node-1", "node-2"]


def test_reservations_count_until_bound_or_expired(seeded, cluster):
    def reservation(job, expires, replicas=1):
        return Reservation("ml", job, "team-b", 8, replicas, ["node-2"] * replicas, None, expires)

    data = {r.key: r.value() for r in (reservation("waiting", NOW + 60), reservation("stale", NOW - 1),
                                       reservation("bound", NOW + 60), reservation("half", NOW + 60, replicas=2))}
    seeded.put({"kind": "ConfigMap", "metadata": {"name": names.RESERVATIONS_CONFIGMAP,
                                                  "namespace": names.DEFAULT_NAMESPACE}, "data": data})
    seeded.put(gpu_pod("ml", "bound", gpus=8, node="node-1", labels={**queue_label("team-b"), names.JOB_LABEL: "bound"}))
    seeded.put(gpu_pod("ml", "half-0", gpus=8, node="node-2", labels={**queue_label("team-b"), names.JOB_LABEL: "half"}))
    seeded.put(gpu_pod("ml", "half-1", gpus=8, labels={**queue_label("team-b"), names.JOB_LABEL: "half"}))
    got = jobs(look(cluster)[0])
    assert got["ml/waiting"].running == ["node-2"]  # reserved: counted as running where it will run
    assert "ml/stale" not in got  # expired
    assert got["ml/bound"].running == ["node-1"]  # its pod is bound: the pod counts, not the reservation
    assert (got["ml/half"].replicas, got["ml/half"].running) == (2, ["node-2", "node-2"])  # still the reservation


def test_kai_queues_when_there_is_no_queue_config_map(api, cluster):
    api.put(node_object(Node(name="n", gpus=8)))
    api.put({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "dept"},
             "spec": {"resources": {"gpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}})
    api.put({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"},
             "spec": {"parentQueue": "dept", "priority": 2,
                      "resources": {"gpu": {"quota": 4, "limit": 6, "overQuotaWeight": 3}}}})
    scenario, warnings = look(cluster)
    assert scenario.queues == [Queue("dept", deserved=8), Queue("team-a", parent="dept", deserved=4, limit=6,
                                                                 over_quota_weight=3, priority=2)]
    assert warnings == [] and api.calls("/apis/scheduling.run.ai/v2/queues") == 1


def test_no_queues_at_all_is_a_warning(api, cluster):
    api.put(node_object(Node(name="n", gpus=8)))
    assert look(cluster)[1] == ["no queues: neither the ConfigMap gpu-policy/gpu-policy-queues nor KAI-Scheduler "
                                "Queue objects exist, so every GPU pod is unmanaged (docs/kubernetes.md)"]


def test_a_partly_bound_gang_is_planned_as_its_bound_part(seeded, cluster):
    for r, node in enumerate(("node-1", None)):
        seeded.put(gpu_pod("ml", f"g-{r}", gpus=4, node=node, labels={**queue_label("team-a"), names.JOB_LABEL: "g"}))
    scenario, warnings = look(cluster)
    assert [(j.name, j.replicas, j.running) for j in scenario.jobs] == [("ml/g", 1, ["node-1"])]
    assert warnings == ["job ml/g: 1 of 2 pods are bound; planned as the bound part"]


def test_snapshot_is_a_valid_scenario(seeded, cluster):
    seeded.put(gpu_pod("ml", "a", gpus=8, node="node-1", labels=queue_label("team-a")))
    from gpu_policy.model.scenario_dump import scenario_to_dict
    from gpu_policy.model.scenario_file import parse_scenario
    scenario, _ = look(cluster)
    assert parse_scenario(json.loads(json.dumps(scenario_to_dict(scenario))), "again").jobs == scenario.jobs
