"""Preemption-safe training in checkpointed steps (docs/checkpointing.md)."""

from gpu_policy.checkpoint.guard import GRACE_ENV, PreemptionGuard
from gpu_policy.checkpoint.lock import LockHeld
from gpu_policy.checkpoint.policy import CheckpointPolicy, daly_interval, young_interval
from gpu_policy.checkpoint.runner import TrainingSummary, run_training_steps
from gpu_policy.checkpoint.serializers import PickleSerializer, StateFormatError, StateSerializer
from gpu_policy.checkpoint.store import CheckpointError, CheckpointInfo, CheckpointStore
from gpu_policy.checkpoint.torch_state import TorchSerializer, restore_training_state, training_state

__all__ = [
    "GRACE_ENV", "CheckpointError", "CheckpointInfo", "CheckpointPolicy", "CheckpointStore", "LockHeld",
    "PickleSerializer", "PreemptionGuard", "StateFormatError", "StateSerializer", "TorchSerializer",
    "TrainingSummary", "daly_interval", "restore_training_state", "run_training_steps", "training_state",
    "young_interval",
]
