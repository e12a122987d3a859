"""The docs' ```python blocks that need Airflow, each imported as a DAG file by Airflow's DagBag."""

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from tests.docs_examples import blocks, described, run  # noqa: E402


@pytest.mark.parametrize("block", [b for b in blocks() if b.environment == "airflow" and not b.illustrative],
                         ids=lambda b: b.id)
def test_airflow_example_imports(block, tmp_path, airflow_db):
    done = run(block, tmp_path)
    assert done.returncode == 0, described(done, block)
    if "DAG(" in block.source:
        assert "DAGs imported: ['" in done.stdout, described(done, block)
