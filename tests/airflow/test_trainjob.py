"""gpu-policy's gated steps in Airflow's dag.test() on SQLite, through the cncf provider's
connection and the real kubernetes 36.x client (kubernetes_asyncio in the triggers), against the
fake API server with the stand-in Kubeflow Trainer, kube-scheduler and kubelet and gpu-policy's
real controller (tests/kubernetes/live_cluster.py). The DAGs: tests/airflow/dags/admitted.py.

- GatedTrainJobOperator, in the worker and deferred: a TrainJob of 4 nodes x 8 GPUs, its 4 pods
  admitted together onto the 4 free nodes, the task ending with the TrainJob;
- GatedKubernetesPodOperator(deferrable=True): the task is deferred to GatedPodTrigger while its
  pod is gated, and completes after the release (KubernetesPodOperator's trigger then waits for
  the run);
- a retried task (its first try's trigger could not read) creates nothing new: it finds the pod
  or TrainJob the first try created;
- execution_timeout holds while the task is deferred."""

import json
from typing import Callable

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from tests.airflow.conftest import TEST_DAGS  # noqa: E402
from tests.airflow.test_dags import xcom  # noqa: E402
from tests.kubernetes.controller_harness import cluster_of  # noqa: E402
from tests.kubernetes.fake_api import FakeKubernetes  # noqa: E402
from tests.kubernetes.live_cluster import LiveCluster  # noqa: E402

TRAIN_JOB_PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"


@pytest.fixture
def api(tmp_path, monkeypatch):
    """The fake API server behind the Airflow connection `fake_k8s` (namespace `ml`)."""
    with FakeKubernetes() as fake:
        config = fake.kubeconfig(tmp_path / "kubeconfig")
        monkeypatch.setenv("AIRFLOW_CONN_FAKE_K8S", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": config, "namespace": "ml"}}))
        fake.config = config
        yield fake


@pytest.fixture(scope="module")
def dags(airflow_db):
    from airflow.models.dagbag import DagBag

    bag = DagBag(dag_folder=str(TEST_DAGS))
    assert bag.import_errors == {}
    return bag


def deferred_to(dag_id: str) -> tuple[str | None, str | None]:
    """(next_method, trigger class) of the DAG's task instance deferred now, from Airflow's database."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id,
                                                        TaskInstance.trigger_id.is_not(None))).first()
        trigger = session.get(Trigger, ti.trigger_id) if ti is not None else None
        return (ti.next_method if ti else None), (trigger.classpath.rpartition(".")[2] if trigger else None)


def where_it_waits(dag_id: str, waits: Callable[[], bool], seen: list) -> Callable[[], bool]:
    """A LiveCluster `hold`: no release until `waits()` (the step has begun to wait for it); on
    that turn, before the release, where the task instance waits (`deferred_to`) goes into `seen`.
    Read there, it is where the task waited, whichever thread runs first: a look on another turn
    could fall before the task deferred (its pods already gated) or after the release."""
    def hold() -> bool:
        if not waits():
            return True
        if not seen:
            seen.append(deferred_to(dag_id))
        return False
    return hold


def pods_listed(api) -> bool:
    """Whether a step has listed its TrainJob's pods: it waits for their release now."""
    return any("jobset.sigs.k8s.io/jobset-name=llm-pretrain" in r.query.get("labelSelector", "") for r in api.requests)


def events_read(api) -> bool:
    """Whether a step has read its pod's Events: it waits for the release now."""
    return any(r.path.endswith("/events") and "fine-tune" in r.query.get("fieldSelector", "") for r in api.requests)


def states(run) -> dict[str, tuple[str, int]]:
    return {ti.task_id: (ti.state, ti.try_number) for ti in run.get_task_instances()}


@pytest.mark.parametrize("dag_id,deferred", [("train_job_in_the_worker", False), ("train_job_deferred", True)])
def test_a_train_job_s_4_pods_are_admitted_together_and_the_task_ends_with_it(api, dags, dag_id, deferred):
    seen = []
    with LiveCluster(api, api.config, hold=where_it_waits(dag_id, lambda: pods_listed(api), seen)) as live:
        run = dags.get_dag(dag_id).test()
    assert run.state == "success", states(run)
    job = live.trainer.train_job("ml", "llm-pretrain")
    assert [c["type"] for c in job["status"]["conditions"]] == ["Complete"]
    pods = {p["metadata"]["name"] for p in live.trainer.pods("ml", "llm-pretrain")}
    assert len(pods) == 4 and live.released_together(pods)
    assert sorted(live.releases[-1][p] for p in pods) == ["n1", "n2", "n3", "n4"]
    admission = xcom(run, "pretrain", "admission")
    assert admission["released"] and sorted(admission["nodes"]) == ["n1", "n2", "n3", "n4"] and admission["pods"] == 4
    assert admission["event"] == "GpuPolicyAdmitted"
    assert xcom(run, "pretrain")["phase"] == "Complete"
    # deferred: while its pods were gated, the task waited in TrainJobTrigger, not in a worker
    assert seen == [("release_reentry", "TrainJobTrigger") if deferred else (None, None)]
    assert api.calls(TRAIN_JOB_PATH, "POST") == 1
    labels = job["metadata"]["labels"]
    assert (labels["dag_id"], labels["task_id"], labels["try_number"]) == (dag_id, "pretrain", "1")


def test_a_deferred_gated_pod_waits_in_the_triggerer_and_completes_after_release(api, dags):
    seen = []

    def pods():
        return [p for p in api.objects("pods", "ml") if p["metadata"]["labels"].get("task_id") == "fine_tune"]

    with LiveCluster(api, api.config, hold=where_it_waits("gated_pod_deferred", lambda: events_read(api), seen)):
        run = dags.get_dag("gated_pod_deferred").test()
    assert run.state == "success", states(run)
    assert seen == [("admission_reentry", "GatedPodTrigger")]  # deferred to our trigger while its pod was gated
    admission = xcom(run, "fine_tune", "admission")
    assert admission["released"] and admission["node"] in ("n1", "n2", "n3", "n4")
    assert admission["event"] == "GpuPolicyAdmitted"
    assert api.calls("/api/v1/namespaces/ml/pods", "POST") == 1
    assert pods() == []  # it ran and ended; KubernetesPodOperator's on_finish_action deleted it


def test_a_retried_gated_pod_task_finds_its_pod_and_creates_none(api, dags):
    api.inject(500, method="GET", path=r"/api/v1/namespaces/ml/pods/fine-tune-.*", times=3)

    # the first try's trigger never reads the Events (the pod's read fails first): the retry's does
    with LiveCluster(api, api.config, hold=lambda: not events_read(api)):
        run = dags.get_dag("gated_pod_retried").test()
    assert run.state == "success", states(run)
    assert states(run)["fine_tune"] == ("success", 2)  # the first try failed: its trigger could not read the pod
    assert api.calls("/api/v1/namespaces/ml/pods", "POST") == 1  # the retry created nothing


def test_a_retried_train_job_task_finds_its_train_job_and_creates_none(api, dags):
    api.inject(500, method="GET", path=TRAIN_JOB_PATH + "/llm-pretrain", times=3)

    # the first try's trigger never lists the pods (the TrainJob's read fails first): the retry's does
    with LiveCluster(api, api.config, hold=lambda: not pods_listed(api)) as live:
        run = dags.get_dag("train_job_retried").test()
    assert run.state == "success", states(run)
    assert states(run)["pretrain"] == ("success", 2)
    assert api.calls(TRAIN_JOB_PATH, "POST") == 1
    assert live.released_together({p["metadata"]["name"] for p in live.trainer.pods("ml", "llm-pretrain")})


def test_execution_timeout_holds_while_the_task_is_deferred(api, dags):
    cluster_of(api, namespace="ml")  # no controller: the pod stays gated
    run = dags.get_dag("gated_pod_deferred_timeout").test()
    assert run.state == "failed" and states(run)["fine_tune"] == ("failed", 1)
    assert api.calls("/api/v1/namespaces/ml/pods", "POST") == 1
    assert api.objects("pods", "ml") == []  # not admitted: gone, as on_finish_action says


class TaskInstance:
    """What the operator reads of its task instance, outside a DAG run (no task state store:
    Airflow before 3.3)."""

    def __init__(self, try_number: int = 1):
        self.dag_id, self.task_id, self.map_index, self.try_number, self.pushed = "d", "pretrain", -1, try_number, {}

    def xcom_push(self, key, value):
        json.dumps(value)
        self.pushed[key] = value


def operator(**overrides):
    from gpu_policy.airflow.operators.trainjob import GatedTrainJobOperator
    from tests.airflow.dags.admitted import TRAIN_JOB

    args = {"task_id": "pretrain", "kubernetes_conn_id": "fake_k8s", "namespace": "ml", "train_job": TRAIN_JOB,
            "job_name": "llm-pretrain", "team": "a", "admission_timeout_s": 0, "admission_poll_s": 1}
    return GatedTrainJobOperator(**{**args, **overrides})


@pytest.mark.parametrize("bad,match", [({"num_nodes": -1}, r"`num_nodes` must be a whole number >= 0"),
                                       ({"gpus_per_node": 1.5}, r"`gpus_per_node` must be a whole number >= 0"),
                                       ({"admission_poll_s": 0}, r"`admission_poll_s` must be a number of seconds > 0"),
                                       ({"deferrable": "yes"}, r"`deferrable` must be true or false")])
def test_bad_arguments_fail_at_once_naming_the_argument(bad, match):
    from airflow.exceptions import AirflowException

    with pytest.raises(AirflowException, match=match):
        operator(**bad)


def test_a_bad_manifest_fails_the_task_in_one_line_before_any_request(api):
    from airflow.exceptions import AirflowException

    with pytest.raises(AirflowException, match=r"^TrainJob manifest: spec.runtimeRef.name: must name a "):
        operator(train_job={"metadata": {"name": "x"}, "spec": {}}).execute({"ti": TaskInstance(), "run_id": "r"})
    assert api.requests == []


def test_without_a_task_state_store_a_retry_finds_its_train_job_by_its_labels(api):
    from airflow.exceptions import AirflowException

    from tests.kubernetes.fake_trainer import FakeTrainer

    FakeTrainer(api, on_read=False)
    first = TaskInstance()
    with pytest.raises(AirflowException, match=r"^TrainJob ml/llm-pretrain: 0 pods waiting for admission: not "
                                               r"admitted within 0 s$"):
        operator().execute({"ti": first, "run_id": "manual__1"})
    assert first.pushed["admission"]["released"] is False
    with pytest.raises(AirflowException, match="not admitted within 0 s"):
        operator().execute({"ti": TaskInstance(try_number=2), "run_id": "manual__1"})
    assert api.calls(TRAIN_JOB_PATH, "POST") == 1  # the retry found it by dag_id, task_id and run_id
    (job,) = api.objects("trainjobs", "ml", group="trainer.kubeflow.org")
    assert job["metadata"]["labels"]["try_number"] == "1"
    with pytest.raises(AirflowException, match=r"^TrainJob ml/llm-pretrain exists and is not this task's"):
        operator().execute({"ti": TaskInstance(), "run_id": "manual__2"})  # another run's task: not its TrainJob


def test_the_triggers_serialize_to_what_makes_them_again():
    from gpu_policy.airflow.triggers.admission import GatedPodTrigger, TrainJobTrigger

    for trigger in (GatedPodTrigger(namespace="ml", name="p", wait_until=1e9, kubernetes_conn_id="k"),
                    TrainJobTrigger(phase="end", namespace="ml", name="t", wait_until=1e9, execution_deadline=2e9)):
        path, kwargs = trigger.serialize()
        module, _, name = path.rpartition(".")
        again = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
        assert again.serialize() == (path, kwargs) and json.dumps(kwargs)
