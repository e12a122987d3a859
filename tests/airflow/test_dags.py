"""The example DAGs import cleanly and run end to end with dag.test() on SQLite."""

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from gpu_policy import DEFAULT_IMAGE  # noqa: E402
from tests.airflow.conftest import DAGS  # noqa: E402


def xcom(run, task_id, key="return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key=key)).all()
        assert rows, f"no XCom {key} from {task_id}"
        return XComModel.deserialize_value(rows[0])


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    from airflow.models.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_dagbag_imports(dagbag):
    assert dagbag.import_errors == {}
    assert {"gpu_aware_training", "fair_share_report", "gpu_reconcile"} <= set(dagbag.dag_ids)


def test_gpu_aware_training_end_to_end(dagbag):
    run = dagbag.get_dag("gpu_aware_training").test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert set(states) == {f"{kind}_{k}" for kind in ("plan", "train") for k in (1, 2, 3)}
    for k in (1, 2, 3):
        plan = {key: xcom(run, f"plan_{k}", key) for key in ("node_affinity", "gpu_count", "node_selector")}
        pod = xcom(run, f"train_{k}", "pod")  # built by build_pod_request_obj, not launched
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms == plan["node_affinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        container = pod["spec"]["containers"][0]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": str(plan["gpu_count"])}
        assert pod["spec"]["nodeSelector"] == plan["node_selector"]
        assert pod["metadata"]["labels"]["gpu-policy.io/job"] == "train"  # observations find the step's pod by it
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
        # the gpu-policy image: nothing installed when the pod starts
        assert container["image"] == DEFAULT_IMAGE and container["command"] == ["gpu-policy", "train-example"]
        assert container["args"] == ["--checkpoint-dir", "/checkpoints/train", "--steps", str(k * 100)]


def test_fair_share_report(dagbag, tmp_path):
    from pathlib import Path

    run = dagbag.get_dag("fair_share_report").test()
    assert run.state == "success"
    paths = [Path(p) for p in xcom(run, "fair_share_report")]
    assert [p.name for p in paths] == ["report.md", "fair_share.png"]
    assert "FAIR SHARE" in paths[0].read_text() and paths[1].stat().st_size > 5000


def test_gpu_reconcile_reports_what_it_would_do_on_the_embedded_cluster(dagbag):
    run = dagbag.get_dag("gpu_reconcile").test()
    assert run.state == "success"
    out = xcom(run, "reconcile")
    assert out["summary"]["preemptions"] == 2 and {o["result"] for o in out["outcomes"]} == {"dry run"}
