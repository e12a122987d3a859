"""GpuPlanSensor: re-plan until the training step may start (bounded by the sensor's timeout)."""

from __future__ import annotations

from typing import Sequence

from airflow.exceptions import AirflowException
from airflow.sdk import BaseSensorOperator

from gpu_policy.airflow._observe import StepOperatorBase
from gpu_policy.airflow.operators.plan import push_decision

__all__ = ["GpuPlanSensor"]


class GpuPlanSensor(StepOperatorBase, BaseSensorOperator):
    """Observe the cluster (``kubernetes_conn_id`` or ``scenario_path``, as GpuPlanOperator)
    and plan at every poke, carrying each plan out as GpuPlanOperator does (``execute_plan``);
    succeed, pushing the same XComs as GpuPlanOperator,
    once the step may start. A job that can never fit fails at once; waiting longer than
    ``timeout`` fails as sensors do."""

    template_fields: Sequence[str] = StepOperatorBase.template_fields
    #: reasons that waiting cannot change
    FAILURE_PREFIXES = ("can never fit",)

    def poke(self, context) -> bool:
        decision = self.decide()
        if decision.reason.startswith(self.FAILURE_PREFIXES):
            raise AirflowException(f"{self.job_name} will never start: {decision.reason}")
        if not decision.can_start:
            self.log.info("not yet: %s", decision.reason)
            return False
        push_decision(context, decision)
        self.log.info("may start: %s", decision.reason)
        return True
