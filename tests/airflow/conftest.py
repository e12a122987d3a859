"""Airflow on SQLite in a temporary AIRFLOW_HOME, set before Airflow is imported."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"
#: DAGs only the tests run (against the fake API server): a second DAG bundle, so dag.test() finds them
TEST_DAGS = Path(__file__).resolve().parent / "dags"
_HOME = tempfile.mkdtemp(prefix="gpu-policy-airflow-")
os.environ.setdefault("AIRFLOW_HOME", _HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS))
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_HOME}/airflow.db")
os.environ.setdefault("GPU_POLICY_REPORT_DIR", f"{_HOME}/reports")
os.environ.setdefault("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([
    {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
    {"name": "test-dags", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
     "kwargs": {"path": str(TEST_DAGS)}}]))


@pytest.fixture(scope="session")
def airflow_db():
    """A migrated SQLite metadata database (what dag.test() needs)."""
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                          timeout=600, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-2000:]
    return os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
