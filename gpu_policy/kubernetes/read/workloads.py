"""Which pods form one job, and which of them are gangs: only where the workload says so.

A gang (all replicas start together, a preempted gang loses all of them) is:
- pods sharing the label `gpu-policy.io/job` in one namespace; the annotation (or label)
  `gpu-policy.io/replicas` gives its minimum size;
- the pods of a PodGroup (KAI-Scheduler's annotation `pod-group-name`, Volcano's
  `scheduling.k8s.io/group-name`, the coscheduling plugin's label
  `scheduling.x-k8s.io/pod-group`) whose `spec.minMember` is above 1 (its minimum size);
- the pods of a training operator's job: a Kubeflow PyTorchJob, TFJob, MPIJob or other job
  (`training.kubeflow.org/job-name`), a JobSet (`jobset.sigs.k8s.io/jobset-name`), or one
  worker group of a RayCluster (`ray.io/cluster` with `ray.io/group`, workers only); a
  JobSet that a Kubeflow Trainer TrainJob of its name made waits, until it starts, for the
  TrainJob's `spec.trainer.numNodes` pods (`with_train_job`), however many exist yet;
- the pods of an Indexed batch Job labelled `gpu-policy.io/gang: "true"`.
Everything else is independent: a batch Job's pods (elastic up to `parallelism`), a
Deployment's or StatefulSet's replicas, a pod alone. Sources: docs/kubernetes.md.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.names import (COMPLETION_INDEX_ANNOTATION, GANG_LABEL, JOB_LABEL, JOBSET_LABEL,
                                         POD_GROUP_KEYS, RAY_CLUSTER_LABEL, RAY_GROUP_LABEL, RAY_NODE_TYPE_LABEL,
                                         REPLICAS_ANNOTATION, TRAINING_JOB_LABELS)
from gpu_policy.kubernetes.read.pod_view import PodView



@dataclass(frozen=True)
class Workload:
    """The job a pod belongs to. `group`: the gang's name in the namespace (a pod that is no
    gang is a job of its own, named after itself); `gang`: all-or-nothing; `replicas`: the
    gang's minimum size when the workload says it (None: the pods it has); `pod_group`: the
    PodGroup whose `minMember` decides whether it is a gang (`with_pod_group`); `train_job`:
    the JobSet whose TrainJob of that name, if one exists, sizes the gang (`with_train_job`)."""

    group: str
    gang: bool = False
    replicas: int | None = None
    pod_group: tuple[str, str] | None = None  # (API group of the PodGroup kind, its name)
    train_job: str | None = None


def read_workload(meta: dict, where: str) -> Workload:
    """The workload of a pod, from its labels, annotations and controller."""
    name = meta.get("name", "")
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    size = _replicas(notes.get(REPLICAS_ANNOTATION, labels.get(REPLICAS_ANNOTATION)), where)
    jobset = labels.get(JOBSET_LABEL) or None
    if labels.get(JOB_LABEL):
        return Workload(labels[JOB_LABEL], True, size, train_job=jobset)
    for api, marks, key in POD_GROUP_KEYS:
        named = (notes if marks == "annotations" else labels).get(key)
        if named:  # a gang when its PodGroup's minMember says so (`with_pod_group`)
            return Workload(name, False, size, (api, str(named)))
    for label in TRAINING_JOB_LABELS:
        if labels.get(label):
            return Workload(labels[label], True, size, train_job=jobset)
    if labels.get(RAY_CLUSTER_LABEL):
        if labels.get(RAY_NODE_TYPE_LABEL) == "worker" and labels.get(RAY_GROUP_LABEL):
            return Workload(f"{labels[RAY_CLUSTER_LABEL]}-{labels[RAY_GROUP_LABEL]}", True, size)
        return Workload(name)
    owner = _controller(meta)
    if owner and owner.get("kind") == "Job" and str(owner.get("apiVersion", "")).startswith("batch/"):
        if labels.get(GANG_LABEL) == "true" and COMPLETION_INDEX_ANNOTATION in notes:
            return Workload(owner["name"], True, size)
    return Workload(name)


def min_members(api: str, pod_groups: list[dict]) -> dict[tuple[str, str, str], int]:
    """(namespace, API group, name) -> `spec.minMember` of each PodGroup that has a whole one."""
    out = {}
    for obj in pod_groups:
        meta, size = obj.get("metadata") or {}, (obj.get("spec") or {}).get("minMember")
        if isinstance(size, int) and not isinstance(size, bool):
            out[(str(meta.get("namespace", "")), api, str(meta.get("name", "")))] = size
    return out


def with_pod_group(pod: PodView, sizes: dict[tuple[str, str, str], int]) -> PodView:
    """A PodGroup member as its PodGroup says (`min_members`): a gang of `minMember` when that
    is above 1, else independent (KAI groups even a batch Job's pods, with minMember 1)."""
    size = sizes.get((pod.namespace, *pod.pod_group)) if pod.pod_group else None
    if size is not None and size > 1:
        return dataclasses.replace(pod, group=f"podgroup-{pod.pod_group[1]}", gang=True, replicas=size)
    return pod


def trim_train_job(obj: dict) -> dict:
    """The fields of a TrainJob that `node_counts` reads (the controller's cache keeps only
    these, so its progress reports change nothing that a plan sees)."""
    def part(parent, key: str) -> dict:  # a field of the wrong type reads as absent here; `look` names it
        value = parent.get(key) if isinstance(parent, dict) else None
        return value if isinstance(value, dict) else {}

    meta, trainer = part(obj, "metadata"), part(part(obj, "spec"), "trainer")
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
            "spec": {"trainer": {"numNodes": trainer.get("numNodes")}}}


def node_counts(train_jobs: list[dict]) -> dict[tuple[str, str], int]:
    """(namespace, name) -> `spec.trainer.numNodes` of each TrainJob that states a whole one
    (without it, its runtime's default applies, which gpu-policy does not read)."""
    out = {}
    for obj in train_jobs:
        meta, size = obj.get("metadata") or {}, ((obj.get("spec") or {}).get("trainer") or {}).get("numNodes")
        if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
            out[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = size
    return out


def started_train_job(pod: PodView) -> tuple[str, str] | None:
    """(namespace, JobSet) of a TrainJob's pod that holds GPUs: its TrainJob has started."""
    return (pod.namespace, pod.train_job) if pod.train_job and pod.node else None


def with_train_job(pod: PodView, sizes: dict[tuple[str, str], int], started: set[tuple[str, str]]) -> PodView:
    """A TrainJob's pod (its JobSet's, named as it) in a gang of its node count (`node_counts`)
    until the TrainJob starts (`started`: `started_train_job` of some pod): the gang waits for
    all its pods, however many exist yet. Once some hold GPUs it is the pods it has, as any
    JobSet's: its pods end at different times, and the finished ones are no longer there to count."""
    key = (pod.namespace, pod.train_job)
    if pod.gang and pod.train_job and key in sizes and key not in started:
        return dataclasses.replace(pod, replicas=sizes[key])
    return pod


def gang_trouble(pods: Sequence[PodView]) -> tuple[str, str] | None:
    """What is wrong with a gang's pods, as (verdict, words): ("broken", ...) when some hold GPUs
    but the pods that hold them or will be bound without gpu-policy (not gated) fall short of
    its minimum size (the others were evicted, or wait for gpu-policy): the gang is evicted
    whole and restarts; ("incomplete", ...) when none holds GPUs and fewer pods than its
    minimum exist: it waits for them. None: a whole gang, or no gang."""
    if not pods[0].gang:
        return None
    size = max((p.replicas or 0 for p in pods), default=0) or len(pods)
    holding = sum(1 for p in pods if p.node)
    coming = sum(1 for p in pods if not p.node and not p.gated)
    if holding and holding + coming < size:
        return "broken", (f"a gang of {size} pods with {holding} holding GPUs and {len(pods) - holding} of the rest "
                          "still there")
    if not holding and len(pods) < size:
        return "incomplete", f"waiting for its pods: {len(pods)} of {size} exist"
    return None


def _controller(meta: dict) -> dict | None:
    return next((ref for ref in meta.get("ownerReferences") or [] if ref.get("controller") and ref.get("name")), None)


def _replicas(text, where: str) -> int | None:
    if text is None:
        return None
    value = str(text).strip()
    if not (value.isascii() and value.isdigit() and 1 <= int(value) <= 100_000):
        raise ClusterObjectError(where, f"metadata.annotations.{REPLICAS_ANNOTATION}",
                                 f"must be a whole number from 1 to 100,000, got {json.dumps(text)}")
    return int(value)
