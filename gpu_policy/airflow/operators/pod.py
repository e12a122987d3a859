"""PlannedKubernetesPodOperator: a training pod placed and sized by the plan.

KubernetesPodOperator templates ``node_selector`` and ``container_resources`` but not
``affinity``, and ``container_resources`` must be a V1ResourceRequirements, not a dict;
this subclass reads the plan task's XCom at run time and sets all of them.
"""

from __future__ import annotations

from typing import Any, Sequence

from airflow.exceptions import AirflowException
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import ApiClient
from kubernetes.client import models as k8s

__all__ = ["PlannedKubernetesPodOperator"]


def node_affinity(affinity: dict) -> k8s.V1Affinity | None:
    """The plan's node affinity JSON as a V1Affinity (None for an empty one)."""
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return None
    terms = [k8s.V1NodeSelectorTerm(match_expressions=[
        k8s.V1NodeSelectorRequirement(key=e["key"], operator=e["operator"], values=list(e.get("values", [])))
        for e in term.get("matchExpressions", [])]) for term in required["nodeSelectorTerms"]]
    return k8s.V1Affinity(node_affinity=k8s.V1NodeAffinity(
        required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(node_selector_terms=terms)))


class PlannedKubernetesPodOperator(KubernetesPodOperator):
    """A KubernetesPodOperator whose affinity, node selector, tolerations, GPU limit and
    gpu-policy labels (job and queue, so observations find the pod and drop its
    reservation) come from the XComs of ``plan_task_id`` (a GpuPlanOperator or GpuPlanSensor). With
    ``dry_run=True`` it builds the pod with ``build_pod_request_obj`` and pushes it as JSON
    (XCom key ``pod``) instead of launching it (the example DAG's default on the simulated
    cluster)."""

    template_fields: Sequence[str] = (*KubernetesPodOperator.template_fields, "plan_task_id")

    def __init__(self, *, plan_task_id: str, gpu_resource: str = "nvidia.com/gpu", dry_run: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(dry_run, bool):
            raise AirflowException(f"{type(self).__name__}: `dry_run` must be true or false, got {dry_run!r}")
        self.plan_task_id = plan_task_id
        self.gpu_resource = gpu_resource
        self.dry_run = dry_run

    def apply_plan(self, context) -> None:
        ti = context["ti"]
        pulled = {key: ti.xcom_pull(task_ids=self.plan_task_id, key=key)
                  for key in ("can_start", "reason", "node_affinity", "node_selector", "tolerations", "gpu_count",
                              "pod_labels")}
        if pulled["can_start"] is None:
            raise AirflowException(f"{type(self).__name__}: no plan in XCom from task `{self.plan_task_id}`")
        if not pulled["can_start"]:
            raise AirflowException(f"the plan does not let this step start: {pulled['reason']}")
        self.affinity = node_affinity(pulled["node_affinity"] or {})
        self.node_selector = {**(self.node_selector or {}), **(pulled["node_selector"] or {})}
        self.labels = {**(self.labels or {}), **(pulled["pod_labels"] or {})}  # the plan finds the step's pods by these
        self.tolerations = [*(self.tolerations or []), *(k8s.V1Toleration(**t) for t in pulled["tolerations"] or [])]
        gpus = str(pulled["gpu_count"])
        self.container_resources = k8s.V1ResourceRequirements(limits={self.gpu_resource: gpus},
                                                              requests={self.gpu_resource: gpus})

    def execute(self, context):
        self.apply_plan(context)
        if self.dry_run:
            pod = ApiClient().sanitize_for_serialization(
                self.build_pod_request_obj(context, dry_run=True))  # no API client, no kube config
            self.log.info("dry run: built pod %s without launching it", pod["metadata"]["name"])
            # KubernetesPodOperator's do_xcom_push (off by default) drives its sidecar, so push explicitly
            context["ti"].xcom_push(key="pod", value=pod)
            return pod
        return super().execute(context)
