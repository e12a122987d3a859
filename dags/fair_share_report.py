"""Example DAG: the per-team fair-share report of the cluster, every hour (docs/airflow.md).

Observes the cluster (the embedded one of $GPU_POLICY_SCENARIO, or the live one of the
Kubernetes connection $GPU_POLICY_KUBERNETES_CONN_ID) and its DCGM telemetry, plans,
and writes report.md (the per-team table) and fair_share.png (a bar chart) to
$GPU_POLICY_REPORT_DIR/<run date>, by default $AIRFLOW_HOME/gpu-policy-reports: a
folder the Airflow user owns, never a fixed path in the shared /tmp, where another
user could plant a link.
"""

import os
from datetime import datetime
from importlib import resources

from airflow.sdk import DAG, task

SCENARIO = os.environ.get("GPU_POLICY_SCENARIO",
                          str(resources.files("gpu_policy") / "examples" / "seed3b-owner-returns.yaml"))
KUBERNETES_CONN_ID = os.environ.get("GPU_POLICY_KUBERNETES_CONN_ID") or None  # set: plan that live cluster
AIRFLOW_HOME = os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
REPORT_DIR = os.environ.get("GPU_POLICY_REPORT_DIR") or os.path.join(AIRFLOW_HOME, "gpu-policy-reports")

with DAG(
    dag_id="fair_share_report",
    description="Per-team GPU fair-share report: a table and a plot",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["gpu-policy", "example"],
) as dag:

    @task
    def fair_share_report(ds=None) -> list[str]:
        from gpu_policy.airflow._observe import cluster_for, observe_cluster
        from gpu_policy.actions.cycle import plan_observation
        from gpu_policy.presentation.report import write_report

        cluster = cluster_for("fair_share_report", None if KUBERNETES_CONN_ID else SCENARIO, KUBERNETES_CONN_ID)
        result = plan_observation(observe_cluster(cluster, os.environ.get("GPU_POLICY_DCGM_CONN_ID") or None))
        return [str(p) for p in write_report(result, os.path.join(REPORT_DIR, ds or "latest"),
                                             title=f"GPU fair share, {ds}")]

    fair_share_report()
