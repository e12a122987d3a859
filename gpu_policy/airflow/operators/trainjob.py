"""GatedTrainJobOperator: a Kubeflow Trainer TrainJob whose pods gpu-policy's controller admits as one gang.

The rules (the runtime patch that gates and labels the trainer's pods, what "released" and
"ended" mean) are `gpu_policy.kubernetes.write.trainjob_step`'s; this operator creates the
TrainJob through a cncf-kubernetes connection, finds the one an earlier try of the task
created, and waits: in the worker, or (``deferrable=True``) in the triggerer (`TrainJobTrigger`).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

from airflow.exceptions import AirflowException
from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value
from airflow.sdk import BaseOperator

from gpu_policy.airflow._defer import connection_extras, deadlines, last_seen, not_done
from gpu_policy.airflow._observe import check_rendered, check_seconds, one_line_errors
from gpu_policy.airflow.triggers.admission import TrainJobTrigger
from gpu_policy.kubernetes import KubernetesSettings
from gpu_policy.kubernetes.write.step_client import StepClient
from gpu_policy.kubernetes.write.trainjob_step import (GangAdmission, Finish, admitted_train_job, await_gang_release,
                                                       await_train_job_end)

__all__ = ["GatedTrainJobOperator"]

#: where Airflow 3.3's task state store keeps the TrainJob a try created, for the retries
STATE_KEY = "gpu_policy_train_job"


class GatedTrainJobOperator(BaseOperator):
    """Create the TrainJob ``train_job`` (a manifest: ``metadata.name``, ``spec.runtimeRef``,
    ``spec.trainer``) in ``namespace`` (default: its own, else the connection's) with gpu-policy's
    runtime patch: its trainer pods gated, labelled as job ``job_name`` of team ``team``; with
    ``num_nodes`` and ``gpus_per_node`` above 0, that many nodes of that many GPUs. Wait up to
    ``admission_timeout_s`` (checking every ``admission_poll_s``) for the controller to release
    all its pods, logging each reason, then up to ``run_timeout_s`` for the TrainJob to end,
    logging the trainer's progress. XComs: ``admission`` ``{train_job, released, nodes, pods,
    expected, reason, event, waited_s}``; the return value ``{train_job, phase, message, progress,
    metrics}``. Not released in time, past ``run_timeout_s``, or Failed: the task fails, and the
    TrainJob stays. A retry finds the TrainJob an earlier try created (Airflow 3.3's task state
    store, else the labels ``dag_id``, ``task_id``, ``run_id`` and ``map_index`` on it) and
    waits for it, finished or not. With ``deferrable=True`` the waits run in the triggerer and
    ``execution_timeout`` still holds."""

    template_fields: Sequence[str] = ("train_job", "job_name", "team", "namespace", "kubernetes_conn_id")

    def __init__(self, *, train_job: dict, job_name: str, team: str, namespace: str | None = None,
                 num_nodes: int = 0, gpus_per_node: int = 0, kubernetes_conn_id: str = "kubernetes_default",
                 admission_timeout_s: float = 3600.0, admission_poll_s: float = 10.0, run_timeout_s: float = 86400.0,
                 deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        owner = type(self).__name__
        for name, value in (("num_nodes", num_nodes), ("gpus_per_node", gpus_per_node)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise AirflowException(f"{owner}: `{name}` must be a whole number >= 0 (0: as the manifest says), "
                                       f"got {value!r}")
        check_seconds(owner, {"admission_poll_s": admission_poll_s, "run_timeout_s": run_timeout_s},
                      {"admission_timeout_s": admission_timeout_s})
        if not isinstance(deferrable, bool):
            raise AirflowException(f"{owner}: `deferrable` must be true or false, got {deferrable!r}")
        self.train_job, self.job_name, self.team, self.namespace = train_job, job_name, team, namespace
        self.num_nodes, self.gpus_per_node = num_nodes, gpus_per_node
        self.kubernetes_conn_id = kubernetes_conn_id
        self.admission_timeout_s, self.admission_poll_s, self.run_timeout_s = (admission_timeout_s, admission_poll_s,
                                                                               run_timeout_s)
        self.deferrable = deferrable

    @cached_property
    def hook(self) -> KubernetesHook:
        return KubernetesHook(conn_id=self.kubernetes_conn_id)

    @cached_property
    def client(self) -> StepClient:
        return StepClient(self.hook.api_client, f"k8s:// (connection {self.kubernetes_conn_id})", KubernetesSettings())

    def execute(self, context) -> dict:
        check_rendered(self)
        with one_line_errors():
            body = admitted_train_job(self.train_job, self.job_name, self.team, self.num_nodes, self.gpus_per_node)
            meta = body["metadata"]
            meta["namespace"] = meta.get("namespace") or self.namespace or self.hook.get_namespace() or "default"
            meta["labels"] = {**(meta.get("labels") or {}), **task_labels(context)}
            self.namespace, self.train_job_name = meta["namespace"], self.find_or_create(body, context)
            if self.deferrable:
                self._defer("release", context)
            admission = await_gang_release(self.client, self.namespace, self.train_job_name, self.admission_timeout_s,
                                           self.admission_poll_s, progress=lambda line: self.log.info("%s", line))
        self._admitted(context, admission)
        with one_line_errors():
            end = await_train_job_end(self.client, self.namespace, self.train_job_name, self.run_timeout_s,
                                      self.admission_poll_s, progress=lambda line: self.log.info("%s", line))
        return self._ended(end)

    def find_or_create(self, body: dict, context) -> str:
        """The name of the TrainJob this task instance created on an earlier try, else of the one
        it creates now (kept in the task state store, where Airflow has one)."""
        namespace, store = body["metadata"]["namespace"], context.get("task_state_store")
        name = self._stored(namespace, store) or self._labelled(namespace, context)
        if name:
            self.log.info("TrainJob %s/%s: created by an earlier try of this task; waiting for it", namespace, name)
        else:
            name = body["metadata"]["name"]
            if self.client.create_train_job(namespace, body) is None:
                raise AirflowException(f"TrainJob {namespace}/{name} exists and is not this task's: give the manifest "
                                       "another metadata.name, or delete it")
        if store is not None:
            store.set(STATE_KEY, {"namespace": namespace, "name": name})
        return name

    def _stored(self, namespace: str, store) -> str | None:
        """The TrainJob the task state store names, if it still exists."""
        stored = store.get(STATE_KEY) if store is not None else None
        if not isinstance(stored, dict) or stored.get("namespace") != namespace or not stored.get("name"):
            return None
        return stored["name"] if self.client.read_train_job(namespace, str(stored["name"])) is not None else None

    def _labelled(self, namespace: str, context) -> str | None:
        """The TrainJob that carries this task instance's labels (Airflow before 3.3)."""
        selector = ",".join(f"{k}={v}" for k, v in sorted(task_labels(context, with_try=False).items()))
        found = self.client.list_train_jobs(namespace, selector)
        if len(found) > 1:
            raise AirflowException(f"{len(found)} TrainJobs in {namespace} carry this task's labels: "
                                   f"{', '.join(sorted(j['metadata']['name'] for j in found))}")
        return found[0]["metadata"]["name"] if found else None

    def _defer(self, phase: str, context) -> None:
        wait_s = self.admission_timeout_s if phase == "release" else self.run_timeout_s
        due = deadlines(self, context, wait_s, self.admission_poll_s)
        trigger = TrainJobTrigger(phase=phase, namespace=self.namespace, name=self.train_job_name,
                                  wait_until=due.wait_until, poll_interval_s=self.admission_poll_s,
                                  execution_deadline=due.execution_deadline,
                                  kubernetes_conn_id=self.kubernetes_conn_id,
                                  connection_extras=connection_extras(self.kubernetes_conn_id))
        self.defer(trigger=trigger, method_name=f"{phase}_reentry", timeout=due.defer_timeout)

    def release_reentry(self, context, event: dict) -> None:
        """Back from TrainJobTrigger: all pods released, the wait for the end is deferred too."""
        if event["status"] == "error":
            raise not_done(self, event)
        self.namespace, self.train_job_name = event["namespace"], event["name"]
        where = f"{event['namespace']}/{event['name']}"
        self._admitted(context, last_seen(GangAdmission, event, train_job=where), event)
        self._defer("end", context)

    def end_reentry(self, context, event: dict) -> dict:
        if event["status"] == "error":
            raise not_done(self, event)
        end = last_seen(Finish, event, train_job=f"{event['namespace']}/{event['name']}", phase="")
        if event["status"] != "done":
            raise not_done(self, event, end.line(), f"not ended within {self.run_timeout_s:g} s")
        return self._ended(end)

    def _admitted(self, context, admission: GangAdmission, event: dict | None = None) -> None:
        """XCom ``admission``; the task fails unless all the pods were released (`event`: the trigger's)."""
        context["ti"].xcom_push(key="admission", value=admission.to_dict())
        missed = f"not admitted within {self.admission_timeout_s:g} s"
        if event is not None and event["status"] != "done":
            raise not_done(self, event, admission.line(), missed)
        if not admission.released:
            raise AirflowException(f"{admission.line()}: {missed}")

    def _ended(self, end: Finish) -> dict:
        if end.phase != "Complete":
            raise AirflowException(end.line() + ("" if end.phase else f": not ended within {self.run_timeout_s:g} s"))
        self.log.info("%s", end.line())
        return {"train_job": end.train_job, "phase": end.phase, "message": end.message, "progress": end.progress,
                "metrics": end.metrics}


def task_labels(context, with_try: bool = True) -> dict[str, str]:
    """The labels that tell this task instance's TrainJob (KubernetesPodOperator's keys, its
    values made safe for a label); `with_try`: also the try that created it (not searched by)."""
    ti = context["ti"]
    labels = {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": context["run_id"]}
    if ti.map_index is not None and ti.map_index >= 0:
        labels["map_index"] = str(ti.map_index)
    if with_try:
        labels["try_number"] = str(ti.try_number)
    return {k: make_safe_label_value(str(v)) for k, v in labels.items()}
