"""The install path a cluster pod takes, minus the image: the example pipeline under
kfp.local.SubprocessRunner(use_venv=True), every task installing the wheel `make dist`
built into its own fresh virtual environment (its dependencies come from PyPI)."""

import pytest

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from kfp import local  # noqa: E402

from gpu_policy import __version__  # noqa: E402
from gpu_policy.checkpoint import CheckpointStore  # noqa: E402
from gpu_policy.kfp import components  # noqa: E402
from pipelines.gpu_aware_training import build_pipeline  # noqa: E402


def test_pipeline_installs_the_wheel_in_fresh_venvs(dist_dir, tmp_path, monkeypatch, capfd):
    wheel = dist_dir / f"gpu_policy-{__version__}-py3-none-any.whl"
    ops = components(wheel=str(wheel))
    command = " ".join(ops.plan_gpu_allocation.component_spec.implementation.container.command)
    assert f"'{wheel}'" in command and "gpu-policy==" not in command
    # outside the checkout, so that no task can import gpu_policy from its source tree
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    local.init(runner=local.SubprocessRunner(use_venv=True), pipeline_root=str(tmp_path / "root"))
    ckpt = tmp_path / "ckpt"
    build_pipeline(ops, rounds=1)(checkpoint_uri=str(ckpt), total_steps=20, steps_per_round=20)
    assert [c.step for c in CheckpointStore(str(ckpt)).list()] == [20]
    out = capfd.readouterr().out
    assert "steps 0 -> 20 on 1 planned GPU(s)" in out, out[-3000:]
