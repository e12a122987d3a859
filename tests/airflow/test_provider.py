"""The provider is discoverable and every module and class it lists imports."""

import importlib
from importlib.metadata import entry_points

import pytest

pytest.importorskip("airflow", reason="Airflow is not installed here; `make test` runs these in .venv-airflow")

from gpu_policy.airflow import get_provider_info  # noqa: E402


def test_entry_point_and_modules():
    points = [e for e in entry_points(group="apache_airflow_provider") if e.value == "gpu_policy.airflow:get_provider_info"]
    assert len(points) == 1 and points[0].load()() == get_provider_info()
    info = get_provider_info()
    for kind in ("hooks", "operators", "sensors", "triggers"):
        for module in info[kind][0]["python-modules"]:
            assert importlib.import_module(module).__all__
    hook = info["connection-types"][0]["hook-class-name"]
    module, _, name = hook.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert cls.conn_type == info["connection-types"][0]["connection-type"] == "gpu_policy_dcgm"
