"""PyTorch state dicts in checkpoints; torch is imported only when used."""

from __future__ import annotations

import io
from typing import Any


class TorchSerializer:
    """Serialise with ``torch.save``; load with ``weights_only`` (tensors and plain data only)."""

    def __init__(self, weights_only: bool = True):
        self.weights_only = weights_only

    @staticmethod
    def _torch():
        try:
            import torch
        except ImportError as e:
            raise ImportError("TorchSerializer needs PyTorch: pip install torch") from e
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
