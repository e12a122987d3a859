"""DAGs that only the tests run, against the fake API server behind the connection `fake_k8s`
(tests/airflow/test_trainjob.py): gpu-policy's gated steps, waiting in the worker or deferred."""

from datetime import datetime, timedelta

from airflow.sdk import DAG

from gpu_policy.airflow.operators.gated_pod import GatedKubernetesPodOperator
from gpu_policy.airflow.operators.trainjob import GatedTrainJobOperator

TRAIN_JOB = {"metadata": {"name": "llm-pretrain"},
             "spec": {"runtimeRef": {"name": "torch-distributed"},
                      "trainer": {"image": "registry.example.com/ml/trainer:1.0", "command": ["torchrun", "train.py"]}}}
FAST = {"admission_poll_s": 0.2, "retries": 1, "retry_delay": timedelta(0)}  # a retry at once
POD = {"kubernetes_conn_id": "fake_k8s", "namespace": "ml", "name": "fine-tune",
       "image": "registry.example.com/ml/ft:1", "cmds": ["python", "-m", "fine_tune"], "job_name": "fine-tune",
       "team": "a", "gpus": 8, "get_logs": False, "poll_interval": 0.2, "deferrable": True, **FAST}


def train_job_dag(dag_id: str, deferrable: bool) -> DAG:
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        GatedTrainJobOperator(task_id="pretrain", kubernetes_conn_id="fake_k8s", namespace="ml", train_job=TRAIN_JOB,
                              job_name="llm-pretrain", team="a", num_nodes=4, gpus_per_node=8, run_timeout_s=120,
                              admission_timeout_s=120, deferrable=deferrable, **FAST)
    return dag


train_job_in_the_worker = train_job_dag("train_job_in_the_worker", deferrable=False)
train_job_deferred = train_job_dag("train_job_deferred", deferrable=True)

with DAG(dag_id="gated_pod_deferred", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as pod_deferred:
    GatedKubernetesPodOperator(task_id="fine_tune", admission_timeout_s=120, **POD)

with DAG(dag_id="gated_pod_deferred_timeout", schedule=None, start_date=datetime(2026, 1, 1),
         catchup=False) as pod_timeout:
    GatedKubernetesPodOperator(task_id="fine_tune", admission_timeout_s=600, execution_timeout=timedelta(seconds=2),
                               **{**POD, "retries": 0})

# the same steps, for the tests whose first try fails (their trigger cannot read) and whose retry finds what it created
train_job_retried = train_job_dag("train_job_retried", deferrable=True)
with DAG(dag_id="gated_pod_retried", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as pod_retried:
    GatedKubernetesPodOperator(task_id="fine_tune", admission_timeout_s=120, **POD)
