"""GatedKubernetesPodOperator: a training pod that gpu-policy's controller admits and places.

On a live cluster with the controller (docs/kubernetes.md, "In pipelines") a step does not
plan: its pod is created with the scheduling gate ``gpu-policy.io/admission`` and its job's
labels, and the controller releases it onto the node it chose. The rules for the gate, the
labels and the wait are `gpu_policy.kubernetes.write.gated_step`'s; this subclass only puts them
on KubernetesPodOperator's pod and waits before KubernetesPodOperator's own start-up wait.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from airflow.exceptions import AirflowException
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.pod_generator import PodGenerator
from kubernetes.client import ApiClient
from kubernetes.client import models as k8s

from gpu_policy.airflow._observe import check_rendered, keep_job_args
from gpu_policy.kubernetes import KubernetesSettings
from gpu_policy.kubernetes.names import GPU_TOLERATIONS
from gpu_policy.kubernetes.write.gated_step import (admission_annotations, admission_labels, await_release,
                                                    with_admission_gate, with_checkpoint_protocol)
from gpu_policy.kubernetes.write.step_client import StepClient

__all__ = ["GatedKubernetesPodOperator"]


class GatedKubernetesPodOperator(KubernetesPodOperator):
    """A KubernetesPodOperator whose pod waits for gpu-policy's controller: created with the
    gate ``gpu-policy.io/admission``, labelled as job ``job_name`` of team ``team`` (annotated
    with its ``replicas``), asking for ``gpus`` GPUs (below 1: the ``gpu-policy.io/gpu-fraction``
    annotation) and tolerating the GPU nodes' taint. It reads only that pod and its Events until
    the controller releases it, for up to ``admission_timeout_s`` (checking every
    ``admission_poll_s``), logging each reason; then it runs as KubernetesPodOperator does.
    XCom ``admission``: ``{pod, released, node, reason, event, waited_s}``. Not released in
    time: the task fails with the last reason (and KubernetesPodOperator's ``on_finish_action``
    cleans the pod up). The operator is not deferrable: the wait runs in the worker. With
    ``saves_on_request`` (its trainer uses gpu-policy's PreemptionGuard or a trainer callback)
    the pod is declared to save on request, with ``checkpoint_every_s`` when known, and shown
    its annotations (docs/checkpointing.md)."""

    template_fields: Sequence[str] = (*KubernetesPodOperator.template_fields, "job_name", "team")

    def __init__(self, *, job_name: str, team: str, gpus: float, replicas: int = 1,
                 gpu_resource: str = "nvidia.com/gpu", admission_timeout_s: float = 3600.0,
                 admission_poll_s: float = 10.0, saves_on_request: bool = False,
                 checkpoint_every_s: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        keep_job_args(self, job_name, team, gpus, replicas, 0)
        for name, value, least in (("admission_timeout_s", admission_timeout_s, ">= 0"),
                                   ("admission_poll_s", admission_poll_s, "> 0")):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (value == 0 and least == "> 0"):
                raise AirflowException(f"{type(self).__name__}: `{name}` must be a number of seconds {least}, "
                                       f"got {value!r}")
        self.gpu_resource = gpu_resource
        self.admission_timeout_s = admission_timeout_s
        self.admission_poll_s = admission_poll_s
        self.saves_on_request = saves_on_request
        self.checkpoint_every_s = checkpoint_every_s
        self.admission: dict | None = None

    def build_pod_request_obj(self, context=None, *, dry_run: bool = False) -> k8s.V1Pod:
        check_rendered(self)
        pod = super().build_pod_request_obj(context, dry_run=dry_run)
        pod.metadata.labels = {**(pod.metadata.labels or {}), **admission_labels(self.job_name, self.team)}
        pod.metadata.annotations = {**(pod.metadata.annotations or {}),
                                    **admission_annotations(self.replicas, self.gpus)}
        if self.gpus >= 1:
            gpus = str(int(self.gpus))
            container = pod.spec.containers[0]
            resources = container.resources or k8s.V1ResourceRequirements()
            resources.limits = {**(resources.limits or {}), self.gpu_resource: gpus}
            resources.requests = {**(resources.requests or {}), self.gpu_resource: gpus}
            container.resources = resources
        names = with_admission_gate([g.name for g in pod.spec.scheduling_gates or []])
        pod.spec.scheduling_gates = [k8s.V1PodSchedulingGate(name=name) for name in names]
        pod.spec.tolerations = [*(pod.spec.tolerations or []), *(k8s.V1Toleration(**t) for t in GPU_TOLERATIONS)]
        if self.saves_on_request:  # the rule works on manifests: one home for KFP's and Airflow's pods
            manifest = ApiClient().sanitize_for_serialization(pod)
            pod = PodGenerator.deserialize_model_dict(with_checkpoint_protocol(manifest, self.checkpoint_every_s))
        return pod

    def wait_for_admission(self, pod: k8s.V1Pod) -> dict:
        """Wait for the controller's release of `pod`; fail the task if it does not come in time."""
        client = StepClient(self.client.api_client, f"k8s:// (connection {self.kubernetes_conn_id})",
                            KubernetesSettings())
        admission = await_release(client, pod.metadata.namespace, pod.metadata.name, self.admission_timeout_s,
                                  self.admission_poll_s, progress=lambda line: self.log.info("%s", line))
        self.admission = admission.to_dict()
        if not admission.released:
            raise AirflowException(f"pod {admission.pod} was not admitted within {self.admission_timeout_s:g} s: "
                                   f"{admission.reason or 'gpu-policy has said nothing about it yet'}")
        return self.admission

    def await_pod_start(self, pod: k8s.V1Pod) -> None:
        self.wait_for_admission(pod)
        super().await_pod_start(pod)

    def execute(self, context):
        try:
            return super().execute(context)
        finally:
            if self.admission is not None:
                context["ti"].xcom_push(key="admission", value=self.admission)
