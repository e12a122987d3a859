"""Kubeflow Pipelines components for gpu-policy (docs/kubeflow.md).

Needs the ``[kfp]`` extra: ``pip install 'gpu-policy[kfp]'``. The components are
built by `components()` with a base image and the packages their pods install
(by default this release of gpu-policy); the module-level names use the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

try:
    from kfp import dsl
except ImportError as e:  # pragma: no cover - exercised by tests/test_optional_imports.py
    raise ImportError("gpu_policy.kfp needs Kubeflow Pipelines: pip install 'gpu-policy[kfp]'") from e

from gpu_policy.kfp import functions
from gpu_policy.kfp._image import DEFAULT_BASE_IMAGE, DEFAULT_PACKAGES

NAMES = ("collect_gpu_telemetry", "plan_gpu_allocation", "checkpointed_train_step", "step_may_start")


@dataclass(frozen=True)
class Components:
    collect_gpu_telemetry: Any
    plan_gpu_allocation: Any
    checkpointed_train_step: Any
    step_may_start: Any


def components(base_image: str = DEFAULT_BASE_IMAGE, packages_to_install: list[str] | None = None) -> Components:
    """The components, built for `base_image` with `packages_to_install` in their pods.

    Pass ``packages_to_install=[]`` when the image already has gpu-policy (or to run
    them with kfp.local in an environment that has it).
    """
    packages = list(DEFAULT_PACKAGES if packages_to_install is None else packages_to_install)
    build = dsl.component(base_image=base_image, packages_to_install=packages)
    return Components(*(build(getattr(functions, name)) for name in NAMES))


_default = components()
collect_gpu_telemetry = _default.collect_gpu_telemetry
plan_gpu_allocation = _default.plan_gpu_allocation
checkpointed_train_step = _default.checkpointed_train_step
step_may_start = _default.step_may_start

__all__ = ["DEFAULT_BASE_IMAGE", "DEFAULT_PACKAGES", "Components", "checkpointed_train_step",
           "collect_gpu_telemetry", "components", "plan_gpu_allocation", "step_may_start"]
