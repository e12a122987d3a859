"""`collect_gpu_telemetry` reads through a PrometheusConnect that the user's own code builds
(`prometheus_client="module:function"`, under a trusted prefix), run with kfp.local against
the real Prometheus of tests/telemetry/conftest.py."""

import json
from pathlib import Path

import pytest

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from kfp import local  # noqa: E402

from gpu_policy.kfp import collect_gpu_telemetry, components  # noqa: E402
from tests.telemetry.conftest import NODE_A, prometheus_url  # noqa: E402,F401 (a fixture)
from tests.telemetry.own_client import URL_ENV  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:You may be attemping to run a task that uses custom:RuntimeWarning")
OWN = "tests.telemetry.own_client:prometheus_connect"


def test_the_component_reads_through_the_user_s_own_client(prometheus_url, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv(URL_ENV, prometheus_url)
    monkeypatch.setenv("GPU_POLICY_TRUSTED_MODULES", "tests.telemetry")  # the deployer trusts the team's package
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path))
    task = components().collect_gpu_telemetry(scenario_yaml=json.dumps(NODE_A), prometheus_client=OWN, window_s=4.0)
    signals = json.loads(Path(task.outputs["telemetry"].path).read_text())
    assert signals["source"] == f"prometheus {prometheus_url}"
    assert {(g["node"], g["gpu"]) for g in signals["gpus"]} >= {("node-a", i) for i in range(4)}
    summary = json.loads(task.outputs["Output"])
    assert summary["gpus_seen"] == 6 and summary["unhealthy_gpus"] == ["node-a/3"]


def test_an_untrusted_module_or_both_sources_end_the_step_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("GPU_POLICY_TRUSTED_MODULES", raising=False)

    class Artifact:
        path = str(tmp_path / "t.json")

    with pytest.raises(SystemExit, match=r"prometheus_client: module 'tests.telemetry.own_client' is not under a "
                                         r"trusted prefix"):
        collect_gpu_telemetry.python_func(telemetry=Artifact(), scenario_yaml=json.dumps(NODE_A), prometheus_client=OWN)
    with pytest.raises(SystemExit, match="give prometheus_url or prometheus_client, not both"):
        collect_gpu_telemetry.python_func(telemetry=Artifact(), scenario_yaml=json.dumps(NODE_A), prometheus_client=OWN,
                                          prometheus_url="http://127.0.0.1:9")
