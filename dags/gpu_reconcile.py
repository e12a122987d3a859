"""Example DAG: enforce fair share every five minutes (docs/airflow.md).

For teams whose pods do not come from pipelines: observe the whole cluster, plan it and
carry the plan out (GpuApplyPlanOperator): reclaimed pods are annotated with the plan's
reason and evicted through the Eviction API, honouring PodDisruptionBudgets. The same
loop as `gpu-policy reconcile`, on Airflow's schedule, for a cluster without gpu-policy's
controller (where there is one, it decides at admission: docs/kubernetes.md).

On the embedded simulated cluster it only reports what it would do; set
GPU_POLICY_KUBERNETES_CONN_ID to act on a live cluster.
"""

import os
from datetime import datetime, timedelta
from importlib import resources

from airflow.sdk import DAG

from gpu_policy.airflow.operators.apply import GpuApplyPlanOperator

SCENARIO = os.environ.get("GPU_POLICY_SCENARIO",
                          str(resources.files("gpu_policy") / "examples" / "seed1-greedy-team.yaml"))
KUBERNETES_CONN_ID = os.environ.get("GPU_POLICY_KUBERNETES_CONN_ID") or None  # set: act on that live cluster

with DAG(
    dag_id="gpu_reconcile",
    description="Enforce GPU fair share: observe, plan, evict what the plan reclaims",
    schedule=timedelta(minutes=5),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,  # one round at a time (the planning lease would serialise them anyway)
    tags=["gpu-policy", "example"],
) as dag:
    # [START howto_operator_gpu_apply_plan]
    GpuApplyPlanOperator(
        task_id="reconcile",
        scenario_path=None if KUBERNETES_CONN_ID else SCENARIO,
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        dcgm_conn_id=os.environ.get("GPU_POLICY_DCGM_CONN_ID") or None,
    )
    # [END howto_operator_gpu_apply_plan]
