"""PyTorch state dicts in checkpoints; torch is imported only when used."""

from __future__ import annotations

import io
from typing import Any

from gpu_policy.errors import GpuPolicyError


class TorchSerializer:
    """Serialise with ``torch.save``; load with ``weights_only=True``: tensors and plain data
    only, so a checkpoint cannot run code (``weights_only=False`` unpickles anything: an
    opt-in for trusted locations only, as for `PickleSerializer`)."""

    name = "torch"

    def __init__(self, weights_only: bool = True):
        self.weights_only = weights_only

    @staticmethod
    def _torch():
        try:
            import torch
        except ImportError as e:
            raise GpuPolicyError("TorchSerializer needs PyTorch: pip install torch (no gpu-policy extra: "
                                 "pick the build for your accelerator)") from e
        return torch

    def dumps(self, state: Any) -> bytes:
        buffer = io.BytesIO()
        self._torch().save(state, buffer)
        return buffer.getvalue()

    def loads(self, data: bytes) -> Any:
        return self._torch().load(io.BytesIO(data), weights_only=self.weights_only)


def training_state(model, optimizer=None) -> dict:
    """The state to checkpoint for a model and its optimizer (state dicts)."""
    state = {"model": model.state_dict()}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    return state


def restore_training_state(state: dict, model, optimizer=None) -> None:
    model.load_state_dict(state["model"])
    if optimizer is not None and "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
