"""A pipeline step's Kubeflow Trainer TrainJob on a live cluster: its pods admitted as one gang.

The step creates the TrainJob (`trainer.kubeflow.org/v1alpha1`) with one entry of its own in
`spec.runtimePatches` that puts on the trainer's pods what a gated step's pod carries: the
scheduling gate `gpu-policy.io/admission`, the labels `gpu-policy.io/job` and
`gpu-policy.io/queue` and the GPU nodes' toleration. The trainer makes a JobSet named as the
TrainJob, whose pods the controller admits as one gang of the TrainJob's `numNodes`
(gpu_policy/kubernetes/read/workloads.py). The step then reads the TrainJob, its pods and
the Events about one of them until all of them are released, and the TrainJob until it ends:
its `Complete` or `Failed` condition, with the trainer's progress (`status.trainerStatus`,
where the cluster reports it) on the way. Every request is step_client's, in the step's namespace.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from typing import Callable

from gpu_policy.errors import ClusterError, InputError
from gpu_policy.kubernetes.names import (ADMISSION_GATE, GPU_TOLERATIONS, TRAINER_GROUP, TRAINER_VERSION,
                                         TRAINJOB_KIND)
from gpu_policy.kubernetes.write.gated_step import admission_labels, is_released, placed_on
from gpu_policy.kubernetes.write.step_client import StepClient, Waited, newest_reason, poll

API_VERSION = f"{TRAINER_GROUP}/{TRAINER_VERSION}"
#: our entry in `spec.runtimePatches` (a list keyed by a domain-prefixed manager)
MANAGER = "gpu-policy.io/pipeline-step"
#: the replicated job that runs the trainer in Kubeflow Trainer's runtimes
TRAINER_JOB = "node"
MAX_RUNTIME_PATCHES = 16  # the TrainJob CRD's limit
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_WHERE = "TrainJob manifest"


def admitted_train_job(manifest, job: str, queue: str, num_nodes: int = 0, gpus_per_node: int = 0,
                       gpu_resource: str = "nvidia.com/gpu", replicated_job: str = TRAINER_JOB) -> dict:
    """A copy of the TrainJob `manifest` whose trainer pods (replicated job `replicated_job`) are
    gated, labelled as `job`'s in `queue` and tolerate the GPU taint; with `num_nodes` and
    `gpus_per_node` above 0, its `spec.trainer` asks for that many nodes of that many GPUs."""
    check_train_job(manifest)
    for name, value in (("num_nodes", num_nodes), ("gpus_per_node", gpus_per_node)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError("", name, f"must be a whole number >= 0 (0: as the manifest says), got {value!r}")
    out = copy.deepcopy(manifest)
    out["apiVersion"], out["kind"] = API_VERSION, TRAINJOB_KIND
    spec = out["spec"]
    trainer = spec.setdefault("trainer", {})
    if num_nodes:
        trainer["numNodes"] = num_nodes
    if gpus_per_node:
        resources = trainer.setdefault("resourcesPerNode", {})
        for kind in ("requests", "limits"):
            resources[kind] = {**(resources.get(kind) or {}), gpu_resource: str(gpus_per_node)}
    pod = {"metadata": {"labels": admission_labels(job, queue)},
           "spec": {"schedulingGates": [{"name": ADMISSION_GATE}], "tolerations": copy.deepcopy(GPU_TOLERATIONS)}}
    ours = {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": replicated_job, "template": {"spec": {"template": pod}}}]}}}}
    spec["runtimePatches"] = [p for p in spec.get("runtimePatches") or [] if p.get("manager") != MANAGER] + [ours]
    return out


def check_train_job(manifest) -> None:
    """A TrainJob the step can create (one line naming the field otherwise): a name the API takes,
    a runtime, a whole node count when given, not suspended (its pods would never come)."""
    if not isinstance(manifest, dict):
        raise InputError(_WHERE, "", f"must be a mapping (a TrainJob), got {type(manifest).__name__}")
    for key, want in (("apiVersion", API_VERSION), ("kind", TRAINJOB_KIND)):
        if manifest.get(key, want) != want:
            raise InputError(_WHERE, key, f"must be {want}, got {manifest[key]!r}")
    meta, spec = manifest.get("metadata"), manifest.get("spec")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not _DNS_LABEL.match(name):
        raise InputError(_WHERE, "metadata.name", "must be a DNS label (at most 63 lower-case letters, digits and "
                                                  f"'-', a letter first), got {name!r}")
    if not isinstance(spec, dict):
        raise InputError(_WHERE, "spec", f"must be a mapping, got {spec!r}")
    _check_spec(spec)


def _check_spec(spec: dict) -> None:
    runtime = spec.get("runtimeRef")
    if not isinstance(runtime, dict) or not isinstance(runtime.get("name"), str) or not runtime["name"]:
        raise InputError(_WHERE, "spec.runtimeRef.name", "must name a ClusterTrainingRuntime or TrainingRuntime")
    trainer = spec.get("trainer", {})
    nodes = trainer.get("numNodes", 1) if isinstance(trainer, dict) else None
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise InputError(_WHERE, "spec.trainer.numNodes", f"must be a whole number >= 1, got {nodes!r}")
    if spec.get("suspend"):
        raise InputError(_WHERE, "spec.suspend", "must not be true: a suspended TrainJob makes no pods, and "
                                                 "gpu-policy admits them itself")
    patches = spec.get("runtimePatches", [])
    if not isinstance(patches, list) or not all(isinstance(p, dict) for p in patches) \
            or len([p for p in patches if p.get("manager") != MANAGER]) >= MAX_RUNTIME_PATCHES:
        raise InputError(_WHERE, "spec.runtimePatches", f"must be a list of at most {MAX_RUNTIME_PATCHES - 1} "
                                                        "patches (gpu-policy adds one)")


@dataclass
class GangAdmission(Waited):
    """Where a TrainJob's pods stand: `released` once all `expected` of them (its numNodes;
    None: not stated) exist and are released, onto `nodes` (in the pods' order), and why, in
    gpu-policy's words about the first pod still waiting (else the first)."""

    train_job: str = ""
    nodes: list[str] = field(default_factory=list)
    pods: int = 0
    expected: int | None = None

    def line(self) -> str:
        if self.released:
            state = f"{self.pods} pods released onto {', '.join(self.nodes)}"
        elif self.expected is not None and self.pods < self.expected:
            state = f"{self.pods} of its {self.expected} pods exist, waiting for the rest"
        else:
            state = f"{self.pods} pods waiting for admission"
        return f"TrainJob {self.train_job}: {state}{self.said()}"


def node_count(train_job: dict) -> int | None:
    """Its `spec.trainer.numNodes` (None: not stated, its runtime's default applies)."""
    nodes = ((train_job.get("spec") or {}).get("trainer") or {}).get("numNodes")
    return nodes if isinstance(nodes, int) and not isinstance(nodes, bool) else None


def gang_admission(train_job: dict, pods: list[dict], events: list[dict], waited_s: float) -> GangAdmission:
    """Where the TrainJob's `pods` stand, given the Events about the first one still waiting
    (`waiting_pod`); a TrainJob that failed before its pods were admitted is an error."""
    meta = train_job.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    phase, why = outcome(train_job)
    if phase == "Failed":
        raise ClusterError(f"TrainJob {where} failed before its pods were admitted: {why}")
    pods = sorted(pods, key=_name)
    expected = node_count(train_job)
    released = bool(pods) and all(map(is_released, pods)) and len(pods) >= (expected or 0)
    event, reason = newest_reason(events)
    return GangAdmission(released, reason, event, waited_s, train_job=where, pods=len(pods), expected=expected,
                         nodes=[placed_on(p) for p in pods] if released else [])


def waiting_pod(pods: list[dict]) -> str | None:
    """The pod whose Events tell why the gang waits: the first still gated (else the first)."""
    ordered = sorted(pods, key=_name)
    still = [p for p in ordered if not is_released(p)]
    return _name((still or ordered)[0]) if ordered else None


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def outcome(train_job: dict) -> tuple[str, str]:
    """("Complete" or "Failed", "reason: message") once the TrainJob has ended; ("", "") before."""
    for condition in (train_job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition["type"], f"{condition.get('reason') or ''}: {condition.get('message') or ''}".strip(": ")
    return "", ""


@dataclass
class Finish:
    """How the TrainJob stands once released: its `phase` ("" while it runs), why, and the
    trainer's last `progress` report in words ("" when the cluster reports none)."""

    train_job: str
    phase: str
    message: str = ""
    progress: str = ""
    metrics: dict = field(default_factory=dict)

    def line(self) -> str:
        if self.phase:
            return f"TrainJob {self.train_job}: {self.phase}" + (f" ({self.message})" if self.message else "")
        return f"TrainJob {self.train_job}: running" + (f", {self.progress}" if self.progress else "")


def finish_of(train_job: dict) -> Finish:
    """The TrainJob's end (its conditions) or, while it runs, its trainer's progress."""
    meta = train_job.get("metadata") or {}
    phase, message = outcome(train_job)
    report = (train_job.get("status") or {}).get("trainerStatus") or {}
    metrics = {str(m.get("name")): str(m.get("value")) for m in report.get("metrics") or [] if isinstance(m, dict)}
    words = []
    if report.get("progressPercentage") is not None:
        words.append(f"{report['progressPercentage']}% done")
    if report.get("estimatedRemainingSeconds") is not None:
        words.append(f"about {report['estimatedRemainingSeconds']} s left")
    words += [f"{k}={v}" for k, v in list(metrics.items())[:8]]
    return Finish(f"{meta.get('namespace')}/{meta.get('name')}", phase, message, ", ".join(words), metrics)


def await_gang_release(client: StepClient, namespace: str, name: str, max_wait_s: float, poll_interval_s: float = 5.0,
                       clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                       progress: Callable[[str], None] | None = None) -> GangAdmission:
    """Read the TrainJob, its pods and the Events of the one that waits every `poll_interval_s`
    until all its pods are released or `max_wait_s` has passed (then `released` is false)."""
    def look(waited_s: float) -> GangAdmission:
        pods = client.list_train_job_pods(namespace, name)
        pod = waiting_pod(pods)
        events = client.list_pod_events(namespace, pod) if pod else []
        return gang_admission(_train_job(client, namespace, name), pods, events, waited_s)

    return poll(look, lambda a: a.released, max_wait_s, poll_interval_s, clock, sleep, GangAdmission.line, progress)


def await_train_job_end(client: StepClient, namespace: str, name: str, max_wait_s: float,
                        poll_interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep,
                        progress: Callable[[str], None] | None = None) -> Finish:
    """Read the TrainJob every `poll_interval_s` until it is Complete or Failed or `max_wait_s`
    has passed (then its phase is ""); each new progress report goes to `progress`."""
    return poll(lambda _: finish_of(_train_job(client, namespace, name)), lambda f: bool(f.phase), max_wait_s,
                poll_interval_s, clock, sleep, Finish.line, progress)


def _train_job(client: StepClient, namespace: str, name: str) -> dict:
    train_job = client.read_train_job(namespace, name)
    if train_job is None:
        raise ClusterError(f"{client.where}: TrainJob {namespace}/{name} was deleted while the step waited for it")
    return train_job
