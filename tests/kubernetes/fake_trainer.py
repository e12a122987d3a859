"""Kubeflow Trainer (v2.3) as the fake API server plays it: TrainJobs and the pods of their JobSets.

What its webhook, its controller, JobSet's controller and the batch Job controller do to a
TrainJob (`trainer.kubeflow.org/v1alpha1`), read from their source and written again here for
the tests (nothing copied; /tmp/research/integrations.md, section 1, has the citations):

- the resource, with its status subresource (a client's writes of the TrainJob keep its
  status; the controller writes status);
- the webhook refuses (422) a TrainJob whose runtime is unknown, whose name is no DNS label,
  whose `runtimePatches` are more than 16, have a manager that is no domain-prefixed path, or
  name a replicated job the runtime lacks, and a change of `runtimeRef`, `trainer` or
  `runtimePatches` while the TrainJob is not suspended;
- after each read of TrainJobs (a GET or a LIST; the controllers' turn comes after the answer)
  and at `reconcile()`, every TrainJob that is not suspended gets its pods: the JobSet named as
  the TrainJob has one Job `<name>-node-0` whose `numNodes` pods (the runtime's `mlPolicy` when the
  TrainJob says none) are created as the batch Job controller does, in slow-start batches of 1, 2,
  4, ... per turn, through the API server's admission (so the admission policy gates them in a
  managed namespace). They carry the runtime's pod template with the TrainJob's `trainer` (image,
  command, args, env, resourcesPerNode) on the container `node` and each runtime patch's pod
  template strategically merged in, and the labels and annotations JobSet and Indexed Jobs put on
  them (`jobset.sigs.k8s.io/jobset-name` = the TrainJob's name, the completion index, ...);
- `status.jobsStatus` counts the pods; when all of them have Succeeded the TrainJob is
  `Complete`, when one has Failed it is `Failed` (the JobSet's conditions, renamed);
- the pods of a deleted TrainJob go (garbage collection of the JobSet's children).
Tests drive the rest: the stand-in scheduler binds released pods, `finish_pods` ends them as the
kubelet would, `report` writes `status.trainerStatus` as the trainer in a pod does.
"""

from __future__ import annotations

import copy
import itertools
import re

from gpu_policy.kubernetes.names import JOBSET_LABEL, TRAINER_GROUP, TRAINER_VERSION, TRAINJOB_KIND, TRAINJOBS
from tests.kubernetes.fake.patch import strategic_merge
from tests.kubernetes.fake.server import now_rfc3339

WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_MANAGER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[-A-Za-z0-9_.]+$")
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def torch_runtime(image: str = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime") -> dict:
    """The ClusterTrainingRuntime `torch-distributed` as Kubeflow Trainer's manifests ship it:
    one replicated job `node` running the container `node`, one node unless the TrainJob says more."""
    pod = {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "node", "image": image,
                                                                  "command": ["torchrun", "/workspace/train.py"]}]}}
    return {"mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": pod}}}]}}}


def serve_train_jobs(api) -> None:
    """Serve the TrainJob resource only (no controller): for tests of reading them."""
    api.add_resource(TRAINER_GROUP, TRAINER_VERSION, TRAINJOBS, TRAINJOB_KIND, namespaced=True, status=True)


class FakeTrainer:
    """The trainer's webhook and controllers; `on_read`: they take a turn after each read of
    TrainJobs (False: only when a test calls `reconcile`, for a test that counts turns)."""

    def __init__(self, api, runtimes: dict[str, dict] | None = None, on_read: bool = True):
        self.api = api
        self.runtimes = runtimes or {"torch-distributed": torch_runtime()}
        self.paused = False
        self._batch: dict[tuple[str, str], int] = {}  # TrainJob -> pods the Job controller creates next turn
        self._suffixes = itertools.count(10000)
        serve_train_jobs(api)
        api.admission[(TRAINER_GROUP, TRAINJOBS)] = self.validate
        if on_read:
            api.after_read[(TRAINER_GROUP, TRAINJOBS)] = self.reconcile

    # -- for tests ------------------------------------------------------------------------------
    def train_job(self, namespace: str, name: str) -> dict | None:
        return self.api.get(TRAINJOBS, name, namespace, group=TRAINER_GROUP)

    def pods(self, namespace: str, name: str) -> list[dict]:
        return [p for p in self.api.objects("pods", namespace) if p["metadata"]["labels"].get(JOBSET_LABEL) == name]

    def finish_pods(self, namespace: str, name: str, phase: str = "Succeeded") -> int:
        """The kubelet: the TrainJob's running pods end in `phase`; how many did."""
        ended = 0
        for pod in self.pods(namespace, name):
            if pod.get("status", {}).get("phase") == "Running":
                pod["status"]["phase"] = phase
                self.api.put(pod)
                ended += 1
        return ended

    def report(self, namespace: str, name: str, percent: int, remaining_s: int | None = None,
               metrics: dict[str, str] | None = None) -> None:
        """What the trainer in a pod reports through Kubeflow Trainer's status server."""
        job = self.train_job(namespace, name)
        job.setdefault("status", {})["trainerStatus"] = {
            "progressPercentage": percent, "lastUpdatedTime": now_rfc3339(),
            **({"estimatedRemainingSeconds": remaining_s} if remaining_s is not None else {}),
            **({"metrics": [{"name": k, "value": v} for k, v in metrics.items()]} if metrics else {})}
        self.api.put(job)

    # -- the webhook ----------------------------------------------------------------------------
    def validate(self, method: str, obj: dict):
        name, spec = obj["metadata"]["name"], obj.get("spec") or {}
        runtime = self.runtimes.get((spec.get("runtimeRef") or {}).get("name"))
        problems = []
        if not _DNS_LABEL.match(name):
            problems.append(f'metadata.name: Invalid value: "{name}": must be a DNS-1035 label')
        if runtime is None:
            problems.append(f"spec.runtimeRef: Not found: {(spec.get('runtimeRef') or {}).get('name')!r}")
        patches = spec.get("runtimePatches") or []
        if len(patches) > 16:
            problems.append(f"spec.runtimePatches: Too many: {len(patches)}: must have at most 16 items")
        jobs = {j["name"] for j in ((runtime or {}).get("template") or {}).get("spec", {}).get("replicatedJobs", [])}
        for i, patch in enumerate(patches):
            if not _MANAGER.match(str(patch.get("manager", ""))):
                problems.append(f"spec.runtimePatches[{i}].manager: Invalid value: {patch.get('manager')!r}: must be "
                                "a domain-prefixed path (such as \"acme.io/foo\")")
            for rj in _replicated_jobs(patch):
                if runtime is not None and rj.get("name") not in jobs:
                    problems.append(f"spec.runtimePatches[{i}]: Invalid value: replicatedJob {rj.get('name')!r} "
                                    "does not exist in the runtime")
        if method in ("PUT", "PATCH"):
            old = self.train_job(obj["metadata"].get("namespace", ""), name) or {}
            suspended = (old.get("spec") or {}).get("suspend") or spec.get("suspend")
            for key in ("runtimeRef", "trainer", "runtimePatches"):
                if (old.get("spec") or {}).get(key) != spec.get(key) and (key == "runtimeRef" or not suspended):
                    problems.append(f"spec.{key}: Invalid value: field is immutable")
        if not problems:
            return None
        return 422, (f'admission webhook "{WEBHOOK}" denied the request: {TRAINJOB_KIND}.{TRAINER_GROUP} "{name}" '
                     f"is invalid: {', '.join(problems)}")

    # -- the controllers ------------------------------------------------------------------------
    def reconcile(self) -> None:
        if self.paused:
            return
        jobs = self.api.objects(TRAINJOBS, group=TRAINER_GROUP)
        alive = {(j["metadata"]["namespace"], j["metadata"]["name"]) for j in jobs}
        for pod in self.api.objects("pods"):
            owner = pod["metadata"].get("labels", {}).get(JOBSET_LABEL)
            if owner and (pod["metadata"]["namespace"], owner) not in alive:
                self.api.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
        for job in jobs:
            if not (job.get("spec") or {}).get("suspend") and not _ended(job):
                self._turn(job)

    def _turn(self, job: dict) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        runtime = self.runtimes[job["spec"]["runtimeRef"]["name"]]
        wanted = (job["spec"].get("trainer") or {}).get("numNodes") or runtime["mlPolicy"]["numNodes"]
        pods = self.pods(ns, name)
        have = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in pods}
        missing = [i for i in range(wanted) if i not in have]
        batch = self._batch.get((ns, name), 1)
        for index in missing[:batch]:
            pods.append(self.api.create(self._pod(job, runtime, index)))
        if missing:
            self._batch[(ns, name)] = batch * 2
        phases = [p.get("status", {}).get("phase") for p in pods]
        status = {**(job.get("status") or {}), "jobsStatus": [{
            "name": "node", "ready": phases.count("Running"), "succeeded": phases.count("Succeeded"),
            "failed": phases.count("Failed"), "active": phases.count("Running") + phases.count("Pending"),
            "suspended": 0}]}
        if phases.count("Succeeded") == wanted:
            status["conditions"] = [_condition("Complete", "AllJobsCompleted", "jobset completed successfully")]
        elif "Failed" in phases:
            status["conditions"] = [_condition("Failed", "FailedJobs", f"jobset failed: job {name}-node-0 failed")]
        if status != job.get("status"):
            job["status"] = status
            self.api.put(job)

    def _pod(self, job: dict, runtime: dict, index: int) -> dict:
        """The pod with completion index `index` of the TrainJob's Job `<name>-node-0`."""
        ns, name, uid = job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"]["uid"]
        (rj,) = [j for j in runtime["template"]["spec"]["replicatedJobs"] if j["name"] == "node"]
        template = copy.deepcopy(rj["template"]["spec"]["template"])
        trainer = job["spec"].get("trainer") or {}
        container = next(c for c in template["spec"]["containers"] if c["name"] == "node")
        container.update({k: copy.deepcopy(trainer[k]) for k in ("image", "command", "args", "env") if k in trainer})
        if "resourcesPerNode" in trainer:
            container["resources"] = strategic_merge(container.get("resources") or {}, trainer["resourcesPerNode"])
        for patch in job["spec"].get("runtimePatches") or []:
            for patched in _replicated_jobs(patch):
                if patched.get("name") == "node":
                    template = strategic_merge(template, ((patched.get("template") or {}).get("spec") or {})
                                               .get("template") or {})
        job_name = f"{name}-node-0"
        marks = {JOBSET_LABEL: name, "jobset.sigs.k8s.io/jobset-uid": uid, "jobset.sigs.k8s.io/replicatedjob-name": "node",
                 "jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/job-index": "0",
                 "jobset.sigs.k8s.io/job-global-index": "0", "jobset.sigs.k8s.io/restart-attempt": "0",
                 "batch.kubernetes.io/job-name": job_name, "job-name": job_name,
                 "batch.kubernetes.io/controller-uid": f"{uid}-job", "controller-uid": f"{uid}-job",
                 COMPLETION_INDEX: str(index)}
        meta = template.setdefault("metadata", {})
        meta.update(name=f"{job_name}-{index}-{next(self._suffixes)}", namespace=ns,
                    labels={**(meta.get("labels") or {}), **marks},
                    annotations={**(meta.get("annotations") or {}), **marks},
                    ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": f"{uid}-job",
                                      "controller": True, "blockOwnerDeletion": True}])
        template["spec"].update(hostname=f"{job_name}-{index}", subdomain=name)
        return {"apiVersion": "v1", "kind": "Pod", **template, "status": {"phase": "Pending"}}


def _replicated_jobs(patch: dict) -> list[dict]:
    return ((((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {})
            .get("replicatedJobs") or [])


def _ended(job: dict) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _condition(kind: str, reason: str, message: str) -> dict:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": now_rfc3339()}
