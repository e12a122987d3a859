"""Which pods are one job and which jobs are gangs (gpu_policy/kubernetes/read/workloads.py), with
pods labelled as the batch Job controller, Deployments, StatefulSets, the Kubeflow training
operator, JobSet, KubeRay, KAI-Scheduler and Volcano label them; broken gangs evicted whole."""

import json

import pytest

from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.names import COMPLETION_INDEX_ANNOTATION
from gpu_policy.model import Node, Queue, Scenario
from gpu_policy.planner import plan
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map

NOW = 1_800_000_000.0
TEAM_A, TEAM_B = {names.QUEUE_LABEL: "team-a"}, {names.QUEUE_LABEL: "team-b"}


@pytest.fixture
def nodes(api):
    """Four 8-GPU nodes; team-a and team-b deserve 16 GPUs each."""
    for i in range(4):
        api.put(node_object(Node(f"node-{i}", 8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=16), Queue("team-b", deserved=16)],
                                       jobs=[])))
    return api


def owned(pod: dict, kind: str, name: str, api_version: str = "apps/v1") -> dict:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name, "uid": f"u-{name}",
                                           "controller": True}]
    return pod


def look(cluster):
    obs = cluster(clock=lambda: NOW).observe()
    return {j.name: j for j in obs.scenario.jobs}, obs


def test_a_batch_job_of_32_pods_frees_16_gpus_by_evicting_16_pods(nodes, cluster):
    for i in range(32):  # the Job: parallelism 32, one GPU per pod, borrowing all 32 GPUs
        pod = gpu_pod("ml", f"sweep-{i:02d}", gpus=1, node=f"node-{i // 8}",
                      labels={**TEAM_B, "batch.kubernetes.io/job-name": "sweep"})
        nodes.put(owned(pod, "Job", "sweep", "batch/v1"))
    for r in range(2):  # team-a's gang of two 8-GPU pods, within its guarantee
        nodes.put(gpu_pod("ml", f"train-{r}", gpus=8, labels={**TEAM_A, names.JOB_LABEL: "train"}))
    jobs, obs = look(cluster)
    assert len([j for j in jobs.values() if j.queue == "team-b"]) == 32
    assert all(j.replicas == 1 for j in jobs.values() if j.queue == "team-b")  # independent pods, not a gang
    assert jobs["ml/train"].replicas == 2
    result = plan(obs.scenario)
    preempted = [d for d in result.jobs if d.action == "preempt"]
    assert len(preempted) == 16 and all(d.name.startswith("ml/sweep-") for d in preempted)
    assert result.job("ml/train").action == "start"


def test_deployment_and_statefulset_replicas_are_independent(nodes, cluster):
    for i in range(3):
        nodes.put(owned(gpu_pod("ml", f"serve-7d9f-{i}", gpus=1, node="node-0", labels=TEAM_A), "ReplicaSet",
                        "serve-7d9f"))
        nodes.put(owned(gpu_pod("ml", f"db-{i}", gpus=1, labels=TEAM_A), "StatefulSet", "db"))
    jobs, _ = look(cluster)
    assert sorted(jobs) == sorted([f"ml/serve-7d9f-{i}" for i in range(3)] + [f"ml/db-{i}" for i in range(3)])
    assert all(j.replicas == 1 for j in jobs.values())


@pytest.mark.parametrize("labels,job", [
    ({"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker",
      "training.kubeflow.org/operator-name": "pytorchjob-controller"}, "ml/bert"),
    ({"training.kubeflow.org/job-name": "allreduce", "training.kubeflow.org/job-role": "worker",
      "training.kubeflow.org/operator-name": "mpi-operator"}, "ml/allreduce"),
    ({"jobset.sigs.k8s.io/jobset-name": "llama", "jobset.sigs.k8s.io/replicatedjob-name": "workers"}, "ml/llama"),
    ({"ray.io/cluster": "rc", "ray.io/group": "gpu-workers", "ray.io/node-type": "worker"}, "ml/rc-gpu-workers"),
])
def test_training_operators_jobs_are_gangs(nodes, cluster, labels, job):
    for r in range(3):
        nodes.put(gpu_pod("ml", f"pod-{r}", gpus=2, labels={**TEAM_A, **labels}))
    jobs, _ = look(cluster)
    assert list(jobs) == [job] and jobs[job].replicas == 3


def test_a_ray_head_is_a_job_of_its_own(nodes, cluster):
    nodes.put(gpu_pod("ml", "rc-head", gpus=1, labels={**TEAM_A, "ray.io/cluster": "rc", "ray.io/node-type": "head"}))
    nodes.put(gpu_pod("ml", "rc-w-0", gpus=1, labels={**TEAM_A, "ray.io/cluster": "rc", "ray.io/node-type": "worker",
                                                      "ray.io/group": "g"}))
    assert sorted(look(cluster)[0]) == ["ml/rc-g", "ml/rc-head"]


@pytest.mark.parametrize("gang", [True, False])
def test_an_indexed_job_is_a_gang_only_when_labelled(nodes, cluster, gang):
    for i in range(4):
        labels = {**TEAM_A, **({names.GANG_LABEL: "true"} if gang else {})}
        pod = gpu_pod("ml", f"idx-{i}-x", gpus=1, labels=labels, annotations={COMPLETION_INDEX_ANNOTATION: str(i)})
        nodes.put(owned(pod, "Job", "idx", "batch/v1"))
    jobs, _ = look(cluster)
    assert ({"ml/idx": 4} if gang else {f"ml/idx-{i}-x": 1 for i in range(4)}) == \
        {name: j.replicas for name, j in jobs.items()}


def test_pod_groups_minmember_decides_one_list_per_kind_named(nodes, cluster):
    nodes.add_resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", namespaced=True)
    nodes.add_resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True)
    nodes.put({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
               "metadata": {"name": "pg-sweep", "namespace": "ml"}, "spec": {"minMember": 1, "queue": "team-a"}})
    nodes.put({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "pg-ddp", "namespace": "ml"}, "spec": {"minMember": 3}})
    for i in range(3):
        nodes.put(gpu_pod("ml", f"sweep-{i}", gpus=1, labels=TEAM_A, annotations={"pod-group-name": "pg-sweep"}))
        nodes.put(gpu_pod("ml", f"ddp-{i}", gpus=1, labels=TEAM_B,
                          annotations={"scheduling.k8s.io/group-name": "pg-ddp"}))
    nodes.reset_log()
    jobs, obs = look(cluster)
    assert {n: j.replicas for n, j in jobs.items()} == {"ml/sweep-0": 1, "ml/sweep-1": 1, "ml/sweep-2": 1,
                                                        "ml/podgroup-pg-ddp": 3}
    listed = sorted(r.path for r in nodes.requests if "podgroups" in r.path)
    assert listed == ["/apis/scheduling.run.ai/v2alpha2/podgroups", "/apis/scheduling.volcano.sh/v1beta1/podgroups"]


def test_a_half_evicted_gang_is_evicted_whole_and_reported(nodes, kubeconfig, capsys):
    # a gang of 4 (its size remembered in the annotation); 2 pods were evicted when the planner
    # died, and their replacements wait, gated, for gpu-policy
    for r in range(4):
        pod = gpu_pod("ml", f"ddp-{r}", gpus=8, node=f"node-{r}" if r < 2 else None,
                      labels={**TEAM_A, names.JOB_LABEL: "ddp"}, annotations={names.REPLICAS_ANNOTATION: "4"})
        if r >= 2:
            pod["spec"]["schedulingGates"] = [{"name": names.ADMISSION_GATE}]
        nodes.put(pod)
    cluster = ["--cluster", "k8s://", "--kubeconfig", kubeconfig]
    assert main(["apply", *cluster, "--execute", "--format", "json"]) == 0
    applied = json.loads(capsys.readouterr().out)
    assert any(w.startswith("job ml/ddp: broken: a gang of 4 pods with 2 holding GPUs")
               for w in applied["plan"]["warnings"])
    assert "ml/ddp" not in {d["name"] for d in applied["plan"]["jobs"]}  # not planned as a 2-pod job
    (outcome,) = [o for o in applied["outcomes"] if o["job"] == "ml/ddp"]
    assert (outcome["action"], outcome["result"]) == ("preempt", "done")
    assert sorted(outcome["pods"]) == ["ml/ddp-0", "ml/ddp-1"]
    evicted = sorted(r.path for r in nodes.requests if r.path.endswith("/eviction"))
    assert evicted == ["/api/v1/namespaces/ml/pods/ddp-0/eviction", "/api/v1/namespaces/ml/pods/ddp-1/eviction"]


def test_a_gang_short_of_its_pods_waits_for_them(nodes, cluster):
    for r in range(2):
        nodes.put(gpu_pod("ml", f"ddp-{r}", gpus=8, labels={**TEAM_A, names.JOB_LABEL: "ddp"},
                          annotations={names.REPLICAS_ANNOTATION: "4"}))
    jobs, obs = look(cluster)
    assert jobs == {} and any("job ml/ddp: incomplete: waiting for its pods: 2 of 4 exist" in w for w in obs.warnings)


def test_a_gang_bound_beyond_its_minimum_is_planned_as_the_bound_part(nodes, cluster):
    for r in range(3):
        nodes.put(gpu_pod("ml", f"elastic-{r}", gpus=8, node=f"node-{r}" if r < 2 else None,
                          labels={**TEAM_A, names.JOB_LABEL: "elastic"}, annotations={names.REPLICAS_ANNOTATION: "2"}))
    jobs, _ = look(cluster)
    assert (jobs["ml/elastic"].replicas, jobs["ml/elastic"].running) == (2, ["node-0", "node-1"])


@pytest.mark.parametrize("remembered", ["annotation", "podgroup"])
def test_a_half_evicted_gang_holds_no_gpus_after_the_next_plan(nodes, kubeconfig, cluster, capsys, remembered):
    """The issue's gang of 4 x 8 GPUs lost 2 pods when the planner died and they were not
    recreated; its size is remembered (the annotation, or a Volcano PodGroup's minMember), so
    the next plan evicts the 2 left, and the plan after that starts team-b's waiting job there."""
    if remembered == "podgroup":
        nodes.add_resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True)
        nodes.put({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": "ddp", "namespace": "ml"}, "spec": {"minMember": 4}})
    gang = ({"labels": {**TEAM_A, names.JOB_LABEL: "ddp"}, "annotations": {names.REPLICAS_ANNOTATION: "4"}}
            if remembered == "annotation" else
            {"labels": TEAM_A, "annotations": {"scheduling.k8s.io/group-name": "ddp"}})
    for r in range(2):
        nodes.put(gpu_pod("ml", f"ddp-{r}", gpus=8, node=f"node-{r}", **gang))
    for r in (2, 3):
        nodes.put(gpu_pod("ml", f"b-run-{r}", gpus=8, node=f"node-{r}", labels=TEAM_B))
    nodes.put(gpu_pod("ml", "b-wait", gpus=8, labels={**TEAM_B, names.JOB_LABEL: "b-wait"},
                      annotations={names.REPLICAS_ANNOTATION: "2"}))
    nodes.put(gpu_pod("ml", "b-wait-1", gpus=8, labels={**TEAM_B, names.JOB_LABEL: "b-wait"},
                      annotations={names.REPLICAS_ANNOTATION: "2"}))
    argv = ["--cluster", "k8s://", "--kubeconfig", kubeconfig]
    assert main(["apply", *argv, "--execute", "--format", "json"]) == 0
    applied = json.loads(capsys.readouterr().out)
    assert [(o["action"], o["result"]) for o in applied["outcomes"] if "ddp" in o["job"]] == [("preempt", "done")]
    assert sorted(r.path.split("/")[-2] for r in nodes.requests if r.path.endswith("/eviction")) == ["ddp-0", "ddp-1"]
    nodes.finish_terminating()
    jobs, obs = look(cluster)
    assert not [j for j in jobs.values() if "ddp" in j.name]  # nothing of the gang holds GPUs
    decided = plan(obs.scenario).job("ml/b-wait")
    assert decided.action == "start" and sorted(r.node for r in decided.replicas) == ["node-0", "node-1"]
