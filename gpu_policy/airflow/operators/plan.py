"""GpuPlanOperator: plan the next training step and publish where and how it runs."""

from __future__ import annotations

from typing import Sequence

from gpu_policy.airflow._observe import StepOperatorBase

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


class GpuPlanOperator(StepOperatorBase):
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

    template_fields: Sequence[str] = StepOperatorBase.template_fields

    def execute(self, context) -> dict:
        decision = self.decide()
        self.log.info("%s: %s", "start" if decision.can_start else "not yet", decision.reason)
        return push_decision(context, decision)
