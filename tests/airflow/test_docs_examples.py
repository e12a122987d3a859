"""The docs' ```python blocks that need Airflow, each imported as a DAG file by Airflow's DagBag."""

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from tests.docs_examples import ROOT, blocks, described, run  # noqa: E402


@pytest.mark.parametrize("block", [b for b in blocks() if b.environment == "airflow" and not b.illustrative],
                         ids=lambda b: b.id)
def test_airflow_example_imports(block, tmp_path, airflow_db):
    done = run(block, tmp_path)
    assert done.returncode == 0, described(done, block)
    if "DAG(" in block.source:
        assert "DAGs imported: ['" in done.stdout, described(done, block)


def test_the_round_of_your_own_runs_its_dag_test():
    """docs/airflow.md's DAG of your own is run with dag.test() (above), not only imported, and
    builds its pod without launching one on the embedded cluster."""
    (block,) = [b for b in blocks() if b.environment == "airflow" and "one_training_round" in b.source]
    assert 'if __name__ == "__main__":' in block.source and "dag.test()" in block.source
    assert "dry_run=DRY_RUN" in block.source


def test_the_documented_dcgm_connection_is_the_one_operators_are_told_to_use():
    from gpu_policy.airflow.hooks.dcgm import DcgmHook

    text = (ROOT / "docs" / "airflow.md").read_text()
    assert f"AIRFLOW_CONN_{DcgmHook.default_conn_name.upper()}=" in text
    assert f'dcgm_conn_id="{DcgmHook.default_conn_name}"' in text
