"""A pipeline step's TrainJob on a live cluster (gpu_policy/kubernetes/write/trainjob_step.py):
created with gpu-policy's runtime patch, its pods (made by the stand-in Kubeflow Trainer of
tests/kubernetes/fake_trainer.py, in the Job controller's slow-start batches) admitted by the
real controller as ONE gang of the TrainJob's numNodes, never a part of it, then followed to
its end. Also: how a look and the controller's cache read TrainJobs, and bad manifests."""

import pytest

from gpu_policy.errors import ClusterError, InputError
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.write.step_client import STEP_PERMISSIONS, open_step_client
from gpu_policy.kubernetes.write.trainjob_step import (MANAGER, admitted_train_job, await_gang_release,
                                                       await_train_job_end)
from tests.kubernetes.controller_harness import cluster_of, new_controller, released, settle
from tests.kubernetes.fake import FakeScheduler
from tests.kubernetes.fake_trainer import FakeTrainer, serve_train_jobs
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map
from gpu_policy.model import Node, Queue, Scenario

MANIFEST = {"metadata": {"name": "llm"}, "spec": {"runtimeRef": {"name": "torch-distributed"},
                                                  "trainer": {"image": "registry.example.com/ml/llm:1",
                                                              "command": ["torchrun", "train.py"]}}}


@pytest.fixture
def trainer(api):
    api.add_resource("events.k8s.io", "v1", "events", "Event", True)
    return FakeTrainer(api)


@pytest.fixture
def step(api, kubeconfig, fake_time):
    """The step's client in namespace `jobs` (managed: the admission policy gates its GPU pods)."""
    client, _ = open_step_client("k8s://", kubeconfig=kubeconfig, sleep=fake_time.sleep, monotonic=fake_time.monotonic)
    return client


def create(step, body: dict, namespace: str = "jobs") -> dict | None:
    return step.create_train_job(namespace, {**body, "metadata": {**body["metadata"], "namespace": namespace}})


def test_the_train_job_s_pods_are_admitted_together_as_one_gang_of_its_node_count(api, step, cluster, fake_time):
    cluster_of(api)  # 4 nodes x 8 GPUs, namespace `jobs` managed; a and b deserve 16 each
    api.add_resource("events.k8s.io", "v1", "events", "Event", True)
    api.gate_gpu_pods = True
    trainer = FakeTrainer(api, on_read=False)  # one turn per sleep of the step, no more
    create(step, admitted_train_job(MANIFEST, "llm", "a", num_nodes=4, gpus_per_node=8))
    c = new_controller(cluster)
    seen = []  # the gang's released pods after each turn of the cluster: none, or all four

    def meanwhile(seconds: float) -> None:  # while the step sleeps: the trainer, the controller, the scheduler
        fake_time.sleep(seconds)
        trainer.reconcile()
        settle(c, fake_time)
        seen.append((len(trainer.pods("jobs", "llm")), len(released(api))))
        FakeScheduler(api).schedule_once()

    try:
        lines = []
        admission = await_gang_release(step, "jobs", "llm", max_wait_s=600, poll_interval_s=5,
                                       clock=fake_time.monotonic, sleep=meanwhile, progress=lines.append)
        assert admission.released and sorted(admission.nodes) == ["n1", "n2", "n3", "n4"]
        assert [n for n, _ in seen] == [1, 3, 4]  # the Job controller's slow start: 1, then 2, then 1
        assert all(r in (0, 4) for _, r in seen) and seen[-1][1] == 4  # never a part of the gang
        assert lines[0] == "TrainJob jobs/llm: 0 of its 4 pods exist, waiting for the rest"
        assert lines[-1].startswith("TrainJob jobs/llm: 4 pods released onto n")
        assert "(GpuPolicyAdmitted: " in lines[-1]
        pods = trainer.pods("jobs", "llm")
        assert all(p["metadata"]["labels"][names.JOB_LABEL] == "llm" and p["metadata"]["labels"][names.QUEUE_LABEL] == "a"
                   for p in pods)
        assert all(p["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"} for p in pods)
        assert all(p["spec"]["nodeName"] for p in trainer.pods("jobs", "llm"))  # bound by the scheduler
        first, *_ = trainer.pods("jobs", "llm")  # one pod ends before the others, as they do: no broken gang
        api.put({**first, "status": {"phase": "Succeeded"}})
        settle(c, fake_time)
        assert api.evictions == []

        def running(seconds: float) -> None:
            fake_time.sleep(seconds)
            if len(fake_time.sleeps) == 2:
                trainer.report("jobs", "llm", 40, remaining_s=900, metrics={"loss": "0.52"})
            if len(fake_time.sleeps) == 3:
                trainer.finish_pods("jobs", "llm")
            trainer.reconcile()

        fake_time.sleeps.clear()
        said = []
        finish = await_train_job_end(step, "jobs", "llm", max_wait_s=3600, poll_interval_s=60,
                                     clock=fake_time.monotonic, sleep=running, progress=said.append)
        assert (finish.phase, finish.message) == ("Complete", "AllJobsCompleted: jobset completed successfully")
        assert said == ["TrainJob jobs/llm: running",
                        "TrainJob jobs/llm: running, 40% done, about 900 s left, loss=0.52",
                        "TrainJob jobs/llm: Complete (AllJobsCompleted: jobset completed successfully)"]
    finally:
        c.stop.set()


def test_without_the_train_job_a_jobset_is_a_gang_of_the_pods_it_has(api, cluster):
    for i in range(2):
        api.put(node_object(Node(f"node-{i}", 8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("a", deserved=16)], jobs=[])))
    serve_train_jobs(api)  # the resource, no trainer: the pods are what the test puts
    for i in range(2):
        api.put(gpu_pod("ml", f"js-node-0-{i}-x", gpus=8, labels={names.QUEUE_LABEL: "a", names.JOBSET_LABEL: "js"}))
    api.reset_log()
    jobs = {j.name: j.replicas for j in cluster().observe().scenario.jobs}
    assert jobs == {"ml/js": 2}
    assert [r.path for r in api.requests if "trainjobs" in r.path] == ["/apis/trainer.kubeflow.org/v1alpha1/trainjobs"]
    api.put({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "js",
             "namespace": "ml"}, "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 4}}})
    obs = cluster().observe()
    assert obs.scenario.jobs == [] and any("job ml/js: incomplete: waiting for its pods: 2 of 4 exist" in w
                                           for w in obs.warnings)


def test_no_train_job_is_listed_when_no_gpu_pod_belongs_to_a_jobset(api, cluster):
    api.put(node_object(Node("node-0", 8)))
    serve_train_jobs(api)
    api.put(gpu_pod("ml", "p", gpus=1, labels={names.QUEUE_LABEL: "a", names.JOB_LABEL: "p"}))
    api.reset_log()
    cluster().observe()
    assert not [r for r in api.requests if "trainjobs" in r.path]


def test_a_train_job_s_progress_is_no_change_to_the_controller_s_cache_its_node_count_is():
    from gpu_policy.controller.cache import Cache
    from gpu_policy.kubernetes.transport.kinds import TRAIN_JOBS

    cache = Cache("nvidia.com/gpu")
    job = {"metadata": {"name": "llm", "namespace": "ml", "resourceVersion": "1"},
           "spec": {"trainer": {"numNodes": 4, "image": "x"}}}
    assert cache.apply(TRAIN_JOBS, "ADDED", job)
    progressed = {**job, "metadata": {**job["metadata"], "resourceVersion": "2"},
                  "status": {"trainerStatus": {"progressPercentage": 10}}}
    assert not cache.apply(TRAIN_JOBS, "MODIFIED", progressed)
    grown = {**progressed, "metadata": {**job["metadata"], "resourceVersion": "3"}, "spec": {"trainer": {"numNodes": 8}}}
    assert cache.apply(TRAIN_JOBS, "MODIFIED", grown)
    assert cache.list_train_jobs() is None or cache.list_train_jobs() == []  # not listed: not served yet
    cache.replace(TRAIN_JOBS, [grown])
    assert cache.list_train_jobs() == [{"metadata": {"name": "llm", "namespace": "ml", "resourceVersion": "3"},
                                        "spec": {"trainer": {"numNodes": 8}}}]


def test_the_patch_puts_the_gate_labels_and_toleration_on_the_trainer_s_pods_only():
    body = admitted_train_job({**MANIFEST, "spec": {**MANIFEST["spec"], "runtimePatches": [
        {"manager": "example.com/mine", "trainingRuntimeSpec": {}}]}}, "ml/llm", "team-a")
    assert body["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and body["kind"] == "TrainJob"
    mine, ours = body["spec"]["runtimePatches"]
    assert mine == {"manager": "example.com/mine", "trainingRuntimeSpec": {}} and ours["manager"] == MANAGER
    (job,) = ours["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]
    assert job["name"] == "node"
    assert pod == {"metadata": {"labels": {names.JOB_LABEL: "llm", names.QUEUE_LABEL: "team-a"}},
                   "spec": {"schedulingGates": [{"name": names.ADMISSION_GATE}], "tolerations": names.GPU_TOLERATIONS}}
    assert admitted_train_job(body, "ml/llm", "team-a") == body  # once, however often applied
    assert "numNodes" not in body["spec"]["trainer"] and "resourcesPerNode" not in body["spec"]["trainer"]


@pytest.mark.parametrize("manifest,match", [
    ([], r"^TrainJob manifest: must be a mapping \(a TrainJob\), got list$"),
    ({**MANIFEST, "kind": "PyTorchJob"}, r"^TrainJob manifest: kind: must be TrainJob, got 'PyTorchJob'$"),
    ({**MANIFEST, "metadata": {"name": "LLM_1"}}, r"^TrainJob manifest: metadata.name: must be a DNS label .*got 'LLM_1'$"),
    ({**MANIFEST, "spec": {"trainer": {}}}, r"^TrainJob manifest: spec.runtimeRef.name: must name a "),
    ({**MANIFEST, "spec": {**MANIFEST["spec"], "trainer": {"numNodes": "4"}}},
     r"^TrainJob manifest: spec.trainer.numNodes: must be a whole number >= 1, got '4'$"),
    ({**MANIFEST, "spec": {**MANIFEST["spec"], "suspend": True}}, r"^TrainJob manifest: spec.suspend: must not be true"),
    ({**MANIFEST, "spec": {**MANIFEST["spec"], "runtimePatches": [{"manager": f"a.io/{i}"} for i in range(16)]}},
     r"^TrainJob manifest: spec.runtimePatches: must be a list of at most 15 patches"),
])
def test_a_bad_manifest_is_one_line_naming_the_field(manifest, match):
    with pytest.raises(InputError, match=match):
        admitted_train_job(manifest, "llm", "a")


def test_a_bad_node_count_argument_is_named():
    with pytest.raises(InputError, match=r"^num_nodes: must be a whole number >= 0 \(0: as the manifest says\), got -1$"):
        admitted_train_job(MANIFEST, "llm", "a", num_nodes=-1)


def test_the_trainer_s_webhook_refusal_is_one_line(api, trainer, step):
    with pytest.raises(ClusterError, match=r"create TrainJob jobs/llm: the API server answered 422: admission webhook "
                                           r".*replicatedJob 'trainer' does not exist in the runtime"):
        create(step, admitted_train_job(MANIFEST, "llm", "a", replicated_job="trainer"))


def test_a_retried_step_finds_its_train_job_and_a_failed_one_fails(api, trainer, step, fake_time):
    api.put({"kind": "Namespace", "metadata": {"name": "jobs"}})
    body = admitted_train_job(MANIFEST, "llm", "a", num_nodes=2, gpus_per_node=1)
    assert create(step, body) is not None
    assert create(step, body) is None  # a retry's create: 409, the first one stays
    trainer.reconcile()
    trainer.reconcile()
    for pod in trainer.pods("jobs", "llm"):
        pod["spec"]["schedulingGates"] = []
        pod["spec"]["nodeSelector"] = {names.HOSTNAME_LABEL: "n1"}
        pod["status"]["phase"] = "Running"
        api.put(pod)
    admission = await_gang_release(step, "jobs", "llm", max_wait_s=60, clock=fake_time.monotonic,
                                   sleep=fake_time.sleep)
    assert admission.released and admission.nodes == ["n1", "n1"] and admission.reason == ""
    trainer.finish_pods("jobs", "llm", phase="Failed")
    trainer.reconcile()
    finish = await_train_job_end(step, "jobs", "llm", max_wait_s=60, clock=fake_time.monotonic, sleep=fake_time.sleep)
    assert (finish.phase, finish.message) == ("Failed", "FailedJobs: jobset failed: job llm-node-0 failed")
    assert len(api.objects("trainjobs", "jobs", group="trainer.kubeflow.org")) == 1
    # the step's requests, all in its namespace, all declared for its Role
    assert all("/namespaces/jobs/" in r.path for r in api.requests)
    assert api.permissions_used() <= {(p.verb, p.group, p.resource) for p in STEP_PERMISSIONS}


def test_a_train_job_deleted_while_the_step_waits_is_an_error(api, trainer, step, fake_time):
    create(step, admitted_train_job(MANIFEST, "llm", "a"))

    def delete(seconds: float) -> None:
        fake_time.sleep(seconds)
        api.delete("trainjobs", "llm", "jobs", group="trainer.kubeflow.org")

    with pytest.raises(ClusterError, match=r"TrainJob jobs/llm was deleted while the step waited for it"):
        await_gang_release(step, "jobs", "llm", max_wait_s=60, clock=fake_time.monotonic, sleep=delete)
    trainer.reconcile()
    assert trainer.pods("jobs", "llm") == []  # its pods went with it


def test_the_fake_serves_train_jobs_with_their_status_subresource(tmp_path):
    from kubernetes import client, config

    from tests.kubernetes.fake import FakeKubernetes

    with FakeKubernetes() as fake:  # not the `api` fixture: these writes are the trainer's, not gpu-policy's
        FakeTrainer(fake, on_read=False)
        custom = client.CustomObjectsApi(config.new_client_from_config(fake.kubeconfig(tmp_path / "kubeconfig")))
        where = ("trainer.kubeflow.org", "v1alpha1", "ml", "trainjobs")
        made = custom.create_namespaced_custom_object(*where, {**MANIFEST, "status": {"conditions": [
            {"type": "Complete", "status": "True"}]}})
        assert "status" not in made  # a create sets no status
        made["metadata"]["labels"] = {"team": "nlp"}
        made["status"] = {"jobsStatus": []}
        replaced = custom.replace_namespaced_custom_object(*where, "llm", made)
        assert replaced["metadata"]["labels"] == {"team": "nlp"} and "status" not in replaced  # the object's write
        patched = custom.patch_namespaced_custom_object_status(*where, "llm", {
            "status": {"jobsStatus": [{"name": "node"}]}, "spec": {"suspend": True}})
        assert patched["status"] == {"jobsStatus": [{"name": "node"}]} and "suspend" not in patched["spec"]
        assert [j["metadata"]["name"] for j in custom.list_namespaced_custom_object(*where)["items"]] == ["llm"]
        made["spec"]["trainer"]["image"] = "other:2"  # the webhook: trainer is immutable while not suspended
        with pytest.raises(client.exceptions.ApiException, match="spec.trainer: Invalid value: field is immutable"):
            custom.replace_namespaced_custom_object(*where, "llm", {**made, "metadata": patched["metadata"]})


def test_a_train_job_of_the_wrong_shape_is_named_and_its_pods_are_a_gang_of_those_present(api, cluster):
    api.put(node_object(Node("node-0", 8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("a", deserved=8)], jobs=[])))
    serve_train_jobs(api)
    api.put({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "js",
             "namespace": "ml"}, "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": "4"}}})
    for i in range(2):
        api.put(gpu_pod("ml", f"js-node-0-{i}-x", gpus=4, labels={names.QUEUE_LABEL: "a", names.JOBSET_LABEL: "js"}))
    obs = cluster().observe()
    assert {j.name: j.replicas for j in obs.scenario.jobs} == {"ml/js": 2}
    assert any(w.startswith("TrainJob ml/js") and "spec.trainer.numNodes" in w for w in obs.warnings), obs.warnings
