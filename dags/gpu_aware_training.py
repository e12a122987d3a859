"""Example DAG: GPU-aware training in K checkpointed rounds (docs/airflow.md).

Each round waits for the plan to grant GPUs (GpuPlanSensor: observe, plan, re-plan
until the step may start, bounded by its timeout), then runs the training step as a
pod on the planned node with the planned GPU count (PlannedKubernetesPodOperator),
resuming from the checkpoints of the round before on a PVC.

The training pods run in the gpu-policy image (`make image IMAGE=...`; set
GPU_POLICY_IMAGE to its name), which holds gpu-policy and its pinned dependencies:
nothing is installed when a pod starts. On the embedded simulated cluster the pods
are built but not launched (dry run). For a real cluster, set
GPU_POLICY_KUBERNETES_CONN_ID (the cluster the plan observes) and GPU_POLICY_DRY_RUN=0
(the pods are launched).
"""

import os
from datetime import datetime
from importlib import resources

from airflow.sdk import DAG
from kubernetes.client import models as k8s

from gpu_policy import DEFAULT_IMAGE
from gpu_policy.airflow.operators.pod import PlannedKubernetesPodOperator
from gpu_policy.airflow.sensors.plan import GpuPlanSensor

ROUNDS = 3
STEPS_PER_ROUND = 100
SCENARIO = os.environ.get("GPU_POLICY_SCENARIO",
                          str(resources.files("gpu_policy") / "examples" / "training-cluster.yaml"))
KUBERNETES_CONN_ID = os.environ.get("GPU_POLICY_KUBERNETES_CONN_ID") or None  # set: plan that live cluster
DRY_RUN = os.environ.get("GPU_POLICY_DRY_RUN", "1") != "0"
IMAGE = os.environ.get("GPU_POLICY_IMAGE", DEFAULT_IMAGE)
CHECKPOINTS = k8s.V1Volume(name="checkpoints",
                           persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(claim_name="gpu-policy-checkpoints"))

with DAG(
    dag_id="gpu_aware_training",
    description="Observe, plan and train in checkpointed rounds on the GPUs the plan grants",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["gpu-policy", "example"],
) as dag:
    previous = None
    for k in range(1, ROUNDS + 1):
        # [START howto_sensor_gpu_plan]
        plan = GpuPlanSensor(
            task_id=f"plan_{k}",
            scenario_path=None if KUBERNETES_CONN_ID else SCENARIO,
            kubernetes_conn_id=KUBERNETES_CONN_ID,
            job_name="train",
            team="team-a",
            gpus=1,
            dcgm_conn_id=os.environ.get("GPU_POLICY_DCGM_CONN_ID") or None,  # None: simulated telemetry
            poke_interval=30,
            timeout=30 * 60,
            mode="reschedule",
        )
        # [END howto_sensor_gpu_plan]
        # [START howto_operator_planned_pod]
        train = PlannedKubernetesPodOperator(
            task_id=f"train_{k}",
            plan_task_id=f"plan_{k}",
            name=f"train-round-{k}",
            namespace=os.environ.get("GPU_POLICY_NAMESPACE", "default"),
            image=IMAGE,
            cmds=["gpu-policy", "train-example"],
            arguments=["--checkpoint-dir", "/checkpoints/train", "--steps", str(k * STEPS_PER_ROUND)],
            volumes=[CHECKPOINTS],
            volume_mounts=[k8s.V1VolumeMount(name="checkpoints", mount_path="/checkpoints")],
            retries=2,  # a preempted step exits 143 after saving; the retry resumes it
            dry_run=DRY_RUN,
        )
        # [END howto_operator_planned_pod]
        if previous is not None:
            previous >> plan
        plan >> train
        previous = train
