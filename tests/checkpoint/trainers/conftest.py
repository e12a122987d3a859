"""What the trainer callbacks' tests share: a pod that records its notes, and a controller
that asks for a checkpoint by rewriting the downward-API file as the kubelet would."""

import os
import signal
from datetime import datetime, timezone

import pytest

from gpu_policy.checkpoint import PreemptionGuard
from gpu_policy.model.checkpointing import CHECKPOINT_REQUESTED, rfc3339
from tests.checkpoint.kubelet import write_volume

REQUESTED = datetime(2026, 1, 31, 12, 0, 0, tzinfo=timezone.utc)


class RecordingPod:
    """A pod's annotations as the trainer writes them (the real one: tests/kubernetes/test_own_pod.py)."""

    def __init__(self):
        self.notes: list[tuple[int, float | None, datetime]] = []

    def note_checkpoint(self, step, seconds, at=None):
        self.notes.append((step, seconds, at))


class Controller:
    """Asks for a checkpoint and withdraws the request, through the pod's annotations file;
    `sleep` is the guard's wait while paused: it records the step the trainer paused at and
    then withdraws the request (or sends SIGTERM, with `then="sigterm"`)."""

    def __init__(self, folder, then: str = "withdraw"):
        self.folder, self.then, self.paused_at = folder, then, []
        write_volume(folder, {"other": "kept"})
        self.step = lambda: None

    def ask(self):
        write_volume(self.folder, {"other": "kept", CHECKPOINT_REQUESTED: rfc3339(REQUESTED)})

    def sleep(self, seconds):
        self.paused_at.append(self.step())
        if self.then == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            write_volume(self.folder, {"other": "kept"})


@pytest.fixture
def pod():
    return RecordingPod()


def guard_for(controller: Controller, pod: RecordingPod, **options) -> PreemptionGuard:
    """A guard on the controller's file, noting on `pod`, its clock and `now` fixed before the request
    (a node whose clock is behind: the answer still reads at or after the request)."""
    return PreemptionGuard(pod_info=str(controller.folder / "annotations"), pod=pod, sleep=controller.sleep,
                           now=lambda: datetime(2026, 1, 31, 11, 59, 0, tzinfo=timezone.utc), **options)
