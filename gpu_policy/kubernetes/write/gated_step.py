"""A pipeline step's training pod on a live cluster: created gated, released by the controller.

On a live cluster a step does not plan, hold the Lease or write reservations: its pod is
one more waiting replica for the controller (docs/kubernetes.md, "In pipelines"). The step
creates it with the scheduling gate `gpu-policy.io/admission` (so it works on clusters
without the admission policy too) and the labels that make it a job of its queue, then reads
only that pod and its Events until the controller releases it: the gate gone, the node in
its hostname selector, the reason in an Event. Its requests are step_client's, all in the
step's own namespace.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable

from gpu_policy.errors import ClusterError, GpuPolicyError
from gpu_policy.kubernetes.names import (ADMISSION_GATE, CHECKPOINT_EVERY_S_ANNOTATION, FRACTION_ANNOTATION,
                                         HOSTNAME_LABEL, JOB_LABEL, QUEUE_LABEL, REPLICAS_ANNOTATION,
                                         SAVES_ON_REQUEST_ANNOTATION)
from gpu_policy.kubernetes.write.step_client import StepClient, Waited, newest_reason, poll
from gpu_policy.model.checkpointing import DEFAULT_POD_INFO, GRACE_ENV, POD_GRACE_S, POD_INFO_DIR, POD_INFO_ENV


def admission_labels(job: str, queue: str) -> dict[str, str]:
    """The labels that make a pod one of `job`'s (its name without the namespace) in `queue`."""
    return {JOB_LABEL: job.rpartition("/")[2], QUEUE_LABEL: queue}


def admission_annotations(replicas: int, gpus: float = 1) -> dict[str, str]:
    """How many pods the job's gang has (the controller waits until that many exist) and, for
    less than one GPU, the fraction (the pod then asks for no whole GPU)."""
    return {REPLICAS_ANNOTATION: str(replicas), **({FRACTION_ANNOTATION: f"{gpus:g}"} if gpus < 1 else {})}


def with_admission_gate(gates: list[str]) -> list[str]:
    """Gate names with ours added once; other controllers' gates are kept, in their order."""
    return [g for g in gates if g != ADMISSION_GATE] + [ADMISSION_GATE]


def gated(pod: dict, job: str, queue: str, replicas: int = 1, gpus: float | None = None,
          gpu_resource: str = "nvidia.com/gpu") -> dict:
    """A copy of the pod manifest `pod` with our gate (other gates kept), labels and annotations;
    with `gpus`, its first container asks for that many whole GPUs (a fraction: the annotation)."""
    _check_manifest(pod)
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **admission_labels(job, queue)}
    meta["annotations"] = {**(meta.get("annotations") or {}), **admission_annotations(replicas, gpus or 1)}
    spec = out.setdefault("spec", {})
    if gpus is not None and gpus >= 1:
        resources = spec["containers"][0].setdefault("resources", {})
        for kind in ("requests", "limits"):
            resources[kind] = {**(resources.get(kind) or {}), gpu_resource: str(int(gpus))}
    names = with_admission_gate([g.get("name") for g in spec.get("schedulingGates") or []])
    spec["schedulingGates"] = [{"name": name} for name in names]
    return out


#: the downward-API volume that shows the trainer its pod's annotations (the checkpoint request)
POD_INFO_VOLUME = "gpu-policy-pod-info"


def with_checkpoint_protocol(pod: dict, checkpoint_every_s: float | None = None) -> dict:
    """A copy of the pod manifest `pod` whose trainer (its first container) answers gpu-policy's
    checkpoint requests: annotated ``gpu-policy.io/saves-on-request: "true"`` (and its periodic
    interval, when known), the pod's annotations mounted as a downward-API volume at
    /etc/gpu-policy/pod, and the environment the trainer's PreemptionGuard reads: the file, the
    grace period (the pod's terminationGracePeriodSeconds, 30 s unless set) and the pod's own
    name and namespace (where it notes its checkpoints). Our entries replace same-named ones."""
    _check_manifest(pod)
    out = copy.deepcopy(pod)
    meta, spec = out.setdefault("metadata", {}), out["spec"]
    every = {CHECKPOINT_EVERY_S_ANNOTATION: f"{checkpoint_every_s:g}"} if checkpoint_every_s else {}
    meta["annotations"] = {**(meta.get("annotations") or {}), SAVES_ON_REQUEST_ANNOTATION: "true", **every}
    volume = {"name": POD_INFO_VOLUME, "downwardAPI": {"items": [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}
    spec["volumes"] = [*(v for v in spec.get("volumes") or [] if v.get("name") != POD_INFO_VOLUME), volume]
    trainer = spec["containers"][0]
    mounts = [m for m in trainer.get("volumeMounts") or [] if m.get("mountPath") != POD_INFO_DIR]
    trainer["volumeMounts"] = [*mounts, {"name": POD_INFO_VOLUME, "mountPath": POD_INFO_DIR, "readOnly": True}]
    grace = spec.get("terminationGracePeriodSeconds", POD_GRACE_S)
    ours = [{"name": POD_INFO_ENV, "value": DEFAULT_POD_INFO}, {"name": GRACE_ENV, "value": str(grace)},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    names = {e["name"] for e in ours}
    trainer["env"] = [*(e for e in trainer.get("env") or [] if e.get("name") not in names), *ours]
    return out


def _check_manifest(pod) -> None:
    """A pod manifest a step can create: a name and at least one container (one line otherwise)."""
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise GpuPolicyError(f"pod manifest: metadata.name: must be the pod's name, got "
                             f"{(meta or {}).get('name') if isinstance(meta, dict) else meta!r}")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) or not spec["containers"] \
            or not all(isinstance(c, dict) for c in spec["containers"]):
        raise GpuPolicyError("pod manifest: spec.containers: must list at least one container")


def is_released(pod: dict) -> bool:
    """Whether our gate is gone (other controllers' gates may still hold the pod)."""
    return all(g.get("name") != ADMISSION_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def placed_on(pod: dict) -> str:
    """The node the release chose (its hostname selector), or the node it is bound to; "" when neither."""
    spec = pod.get("spec") or {}
    return (spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL) or spec.get("nodeName") or ""


@dataclass
class Admission(Waited):
    """Where the step's pod stands: `released` (our gate gone) on `node`, and why."""

    pod: str = ""
    node: str = ""

    def line(self) -> str:
        state = f"released onto {self.node}" if self.released else "waiting for admission"
        return f"pod {self.pod}: {state}{self.said()}"


def admission_of(pod: dict, events: list[dict], waited_s: float) -> Admission:
    """Where the pod stands, given the Events about it."""
    meta, released = pod.get("metadata") or {}, is_released(pod)
    event, reason = newest_reason(events)
    return Admission(released, reason, event, waited_s, pod=f"{meta.get('namespace')}/{meta.get('name')}",
                     node=placed_on(pod) if released else "")


def await_release(client: StepClient, namespace: str, name: str, max_wait_s: float, poll_interval_s: float = 5.0,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                  progress: Callable[[str], None] | None = None) -> Admission:
    """Read the pod and its Events every `poll_interval_s` until the controller releases it or
    `max_wait_s` has passed (then `released` is false; the pod stays, still waiting). Each
    change of reason is passed to `progress`. A pod that disappears is an error."""
    def look(waited_s: float) -> Admission:
        pod = _own_pod(client, namespace, name, "while it waited for admission")
        return admission_of(pod, client.list_pod_events(namespace, name), waited_s)

    return poll(look, lambda a: a.released, max_wait_s, poll_interval_s, clock, sleep, Admission.line, progress)


def await_finish(client: StepClient, namespace: str, name: str, max_wait_s: float, poll_interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> str:
    """Read the released pod every `poll_interval_s` until it has ended (Succeeded or Failed) or
    `max_wait_s` has passed; its phase then. A pod that disappears is an error."""
    def look(_: float) -> str:
        return (_own_pod(client, namespace, name, "before it ended").get("status") or {}).get("phase") or "Pending"

    return poll(look, lambda phase: phase in ("Succeeded", "Failed"), max_wait_s, poll_interval_s, clock, sleep)


def _own_pod(client: StepClient, namespace: str, name: str, when: str) -> dict:
    pod = client.read_own_pod(namespace, name)
    if pod is None:
        raise ClusterError(f"{client.where}: pod {namespace}/{name} was deleted {when}")
    return pod


def run_gated(client: StepClient, pod: dict, job: str, queue: str, replicas: int, max_wait_s: float,
              poll_interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep,
              progress: Callable[[str], None] | None = None, gpus: float | None = None) -> Admission:
    """Create the step's pod (the manifest `pod`, in its `metadata.namespace`) gated and labelled
    as one of `job`'s in `queue` (asking for `gpus`, when given), then wait for its release
    (`await_release`). A pod of that name that exists already (a retried task's) is waited for as it is."""
    body = gated(pod, job, queue, replicas, gpus)
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    client.create_own_pod(namespace, body)
    return await_release(client, namespace, name, max_wait_s, poll_interval_s, clock, sleep, progress)
