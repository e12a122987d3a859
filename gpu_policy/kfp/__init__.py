"""Kubeflow Pipelines components for gpu-policy (docs/kubeflow.md).

Needs the ``[kfp]`` extra (docs/install.md). The components are
built by `components()`: to run in an image that holds gpu-policy (by default
`DEFAULT_IMAGE`, built by ``make image``), or to install an exact gpu-policy wheel at
start. The module-level names run in `DEFAULT_IMAGE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_policy.errors import MissingExtra

try:
    from kfp import dsl
except ImportError as e:  # pragma: no cover - exercised by tests/test_optional_imports.py
    raise MissingExtra("gpu_policy.kfp", "Kubeflow Pipelines", "kfp") from e

from gpu_policy import DEFAULT_IMAGE
from gpu_policy.kfp import functions
from gpu_policy.kfp._image import WHEEL_BASE_IMAGE, component_options

NAMES = ("collect_gpu_telemetry", "plan_gpu_allocation", "checkpointed_train_step", "step_may_start", "run_gated_pod",
         "run_trainjob")


@dataclass(frozen=True)
class Components:
    collect_gpu_telemetry: Any
    plan_gpu_allocation: Any
    checkpointed_train_step: Any
    step_may_start: Any
    run_gated_pod: Any
    run_trainjob: Any


def components(image: str | None = None, *, wheel: str | None = None) -> Components:
    """The components, to run in `image` or to install `wheel` when their pods start.

    `image` holds gpu-policy and kfp (``make image IMAGE=...``); the pods install
    nothing. `wheel` is the path (for kfp.local) or URL of a gpu-policy wheel
    (``make dist``); the pods start from `WHEEL_BASE_IMAGE` and install it. With
    neither, `DEFAULT_IMAGE`. An environment that has gpu-policy and kfp runs the
    image-built components with ``kfp.local.SubprocessRunner(use_venv=False)``.
    """
    build = dsl.component(**component_options(image, wheel))
    return Components(*(build(getattr(functions, name)) for name in NAMES))


_default = components()
collect_gpu_telemetry = _default.collect_gpu_telemetry
plan_gpu_allocation = _default.plan_gpu_allocation
checkpointed_train_step = _default.checkpointed_train_step
step_may_start = _default.step_may_start
run_gated_pod = _default.run_gated_pod
run_trainjob = _default.run_trainjob

__all__ = ["DEFAULT_IMAGE", "WHEEL_BASE_IMAGE", "Components", "checkpointed_train_step",
           "collect_gpu_telemetry", "components", "plan_gpu_allocation", "run_gated_pod", "run_trainjob",
           "step_may_start"]
