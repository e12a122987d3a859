"""GpuApplyPlanOperator: observe the cluster, plan it and carry the plan out, once."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from gpu_policy.actions.cycle import apply_plan_once
from gpu_policy.airflow._observe import check_execute_plan, cluster_for, one_line_errors, telemetry_source

__all__ = ["GpuApplyPlanOperator"]


class GpuApplyPlanOperator(BaseOperator):
    """Plan the whole cluster (``kubernetes_conn_id``, default ``kubernetes_default``, or the
    embedded one of ``scenario_path``) and, with ``execute_plan`` (default: true on a live
    cluster, false on the embedded one), carry the plan out under the planning lease: its
    victims are annotated and evicted through the Eviction API, moved jobs' new places
    reserved. Scheduled, it enforces fair share for teams whose pods do not come from
    pipelines (dags/gpu_reconcile.py). Returns the plan's summary and each action's outcome."""

    template_fields: Sequence[str] = ("scenario_path", "kubernetes_conn_id", "dcgm_conn_id")

    def __init__(self, *, scenario_path: str | None = None, kubernetes_conn_id: str | None = None,
                 dcgm_conn_id: str | None = None, execute_plan: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario_path = scenario_path
        self.kubernetes_conn_id = kubernetes_conn_id
        self.dcgm_conn_id = dcgm_conn_id
        self.execute_plan = check_execute_plan(type(self).__name__, execute_plan)

    def execute(self, context) -> dict:
        cluster = cluster_for(type(self).__name__, self.scenario_path, self.kubernetes_conn_id)
        with one_line_errors():
            plan, outcomes = apply_plan_once(cluster, None, *telemetry_source(self.dcgm_conn_id),
                                             execute=self.execute_plan)
        for outcome in outcomes:
            self.log.info("%s", outcome.line())
        return {"summary": plan.summary, "observed": plan.observed, "warnings": plan.warnings,
                "outcomes": [o.to_dict() for o in outcomes]}
