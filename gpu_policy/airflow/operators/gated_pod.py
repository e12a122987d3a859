"""GatedKubernetesPodOperator: a training pod that gpu-policy's controller admits and places.

On a live cluster with the controller (docs/kubernetes.md, "In pipelines") a step does not
plan: its pod is created with the scheduling gate ``gpu-policy.io/admission`` and its job's
labels, and the controller releases it onto the node it chose. The rules for the gate, the
labels and the wait are `gpu_policy.kubernetes.write.gated_step`'s; this subclass only puts them
on KubernetesPodOperator's pod and waits before KubernetesPodOperator's own start-up wait. With
``deferrable=True`` both waits run in the triggerer: first `GatedPodTrigger` (the release), then
KubernetesPodOperator's own trigger (the pod's run), and a retried task finds the pod its first
try created as KubernetesPodOperator does (Airflow 3.3's task state store, else its labels).
"""

from __future__ import annotations

from typing import Any, Sequence

from airflow.exceptions import AirflowException
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.pod_generator import PodGenerator
from kubernetes.client import ApiClient
from kubernetes.client import models as k8s

from gpu_policy.airflow._defer import connection_extras, deadlines, last_seen, not_done
from gpu_policy.airflow._observe import check_rendered, check_seconds, keep_job_args
from gpu_policy.airflow.triggers.admission import GatedPodTrigger
from gpu_policy.kubernetes import KubernetesSettings
from gpu_policy.kubernetes.names import GPU_TOLERATIONS
from gpu_policy.kubernetes.write.gated_step import (Admission, admission_annotations, admission_labels, await_release,
                                                    is_released, with_admission_gate, with_checkpoint_protocol)
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
    cleans the pod up). With ``deferrable=True`` the waits run in the triggerer, freeing the
    worker, and ``execution_timeout`` still holds while the task is deferred. With
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
        check_seconds(type(self).__name__, {"admission_poll_s": admission_poll_s},
                      {"admission_timeout_s": admission_timeout_s})
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

    def invoke_defer_method(self, last_log_time=None, context=None) -> None:
        """Deferred: a pod still gated waits in GatedPodTrigger (then `admission_reentry`); a
        released one in KubernetesPodOperator's own trigger."""
        if self.pod is None or context is None or is_released(ApiClient().sanitize_for_serialization(self.pod)):
            return super().invoke_defer_method(last_log_time=last_log_time, context=context)
        self.convert_config_file_to_dict()
        due = deadlines(self, context, self.admission_timeout_s, self.admission_poll_s)
        trigger = GatedPodTrigger(namespace=self.pod.metadata.namespace, name=self.pod.metadata.name,
                                  wait_until=due.wait_until, poll_interval_s=self.admission_poll_s,
                                  execution_deadline=due.execution_deadline, kubernetes_conn_id=self.kubernetes_conn_id,
                                  connection_extras=connection_extras(self.kubernetes_conn_id),
                                  config_dict=self._config_dict, cluster_context=self.cluster_context,
                                  in_cluster=self.in_cluster)
        self.defer(trigger=trigger, method_name="admission_reentry", timeout=due.defer_timeout)

    def admission_reentry(self, context, event: dict) -> None:
        """Back from GatedPodTrigger: released, the pod's run is deferred to KubernetesPodOperator's
        trigger; not in time (or past execution_timeout), the pod goes as ``on_finish_action``
        says and the task fails with the last reason; on an error the pod stays (a retry finds it)."""
        if event["status"] == "error":
            raise not_done(self, event)
        admission = last_seen(Admission, event, pod=f"{event['namespace']}/{event['name']}")
        self.admission = admission.to_dict()
        context["ti"].xcom_push(key="admission", value=self.admission)
        self.pod = self.hook.get_pod(event["name"], event["namespace"])
        if event["status"] == "done":
            return self.invoke_defer_method(context=context)
        self.patch_already_checked(self.pod, reraise=False)
        self.process_pod_deletion(self.pod, reraise=False)
        raise not_done(self, event, admission.line(), f"not admitted within {self.admission_timeout_s:g} s")

    def await_pod_start(self, pod: k8s.V1Pod) -> None:
        self.wait_for_admission(pod)
        super().await_pod_start(pod)

    def execute(self, context):
        try:
            return super().execute(context)
        finally:
            if self.admission is not None:
                context["ti"].xcom_push(key="admission", value=self.admission)
