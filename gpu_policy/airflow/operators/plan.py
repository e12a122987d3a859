"""GpuPlanOperator: plan the next training step and publish where and how it runs."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from gpu_policy.airflow._observe import StepJobArgs

__all__ = ["GpuPlanOperator"]

#: XCom keys the operator (and GpuPlanSensor) push, besides the return value.
XCOM_KEYS = ("plan", "node_affinity", "node_selector", "tolerations", "gpu_count", "can_start", "reason", "pod_labels",
             "outcomes")


def push_decision(context, decision) -> dict:
    """Push each output under its own key; the return value is all of them but the plan."""
    outputs = decision.outputs()
    ti = context["ti"]
    ti.xcom_push(key="plan", value=decision.plan.to_dict())
    for key in XCOM_KEYS[1:]:
        ti.xcom_push(key=key, value=outputs[key])
    return outputs


class GpuPlanOperator(StepJobArgs, BaseOperator):
    """Plan GPUs for a training step of team (queue) ``team`` on the live cluster of
    ``kubernetes_conn_id`` (default ``kubernetes_default``) or the embedded cluster of
    ``scenario_path``: the job is added to the
    cluster snapshot (waiting) unless it is there, and the plan's decision for it is pushed
    to XCom: ``plan``, ``node_affinity``, ``node_selector``, ``tolerations``,
    ``gpu_count``, ``can_start``, ``reason``, ``pod_labels`` and ``outcomes``. With ``execute_plan``
    (default: true on a live cluster, false on the embedded one) it carries the plan out
    under the planning lease: the plan's victims are evicted and the step's GPUs reserved.
    It does not wait: use GpuPlanSensor for that.
    (The argument is ``team``, not ``queue``: every Airflow operator already has a
    ``queue``, the executor's.)"""

    template_fields: Sequence[str] = StepJobArgs.template_fields

    def __init__(self, *, job_name: str, team: str, gpus: float, scenario_path: str | None = None,
                 kubernetes_conn_id: str | None = None, replicas: int = 1, priority: int = 50,
                 dcgm_conn_id: str | None = None, execute_plan: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.set_job_args(scenario_path, kubernetes_conn_id, job_name, team, gpus, replicas, priority, dcgm_conn_id,
                          execute_plan)

    def execute(self, context) -> dict:
        decision = self.decide()
        self.log.info("%s: %s", "start" if decision.can_start else "not yet", decision.reason)
        return push_decision(context, decision)
