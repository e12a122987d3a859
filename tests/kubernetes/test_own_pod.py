"""The training step tells gpu-policy about its own pod: its job, and each checkpoint (best effort)."""

import logging
from datetime import datetime

from gpu_policy.checkpoint.budget import run_step_budget
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.write.own_pod import OwnPod
from tests.kubernetes.objects import gpu_pod

EXAMPLE = ("gpu_policy.checkpoint.example:example_step", "gpu_policy.checkpoint.example:initial_state")


def test_checkpoints_and_labels_land_on_the_pod(api, cluster, tmp_path):
    api.put(gpu_pod("ml", "train-0", node="n"))
    pod = OwnPod(cluster().client, "ml", "train-0")
    pod.label_job("ml/train", "team-a")
    summary = run_step_budget(str(tmp_path), 30, 30, *EXAMPLE, pod=pod)
    meta = api.get("pods", "train-0", "ml")["metadata"]
    assert meta["labels"] == {names.JOB_LABEL: "train", names.QUEUE_LABEL: "team-a"}
    notes = meta["annotations"]
    assert datetime.fromisoformat(notes[names.LAST_CHECKPOINT_ANNOTATION].replace("Z", "+00:00"))
    assert float(notes[names.CHECKPOINT_SAVE_S_ANNOTATION]) >= 0
    assert api.calls("/api/v1/namespaces/ml/pods/train-0", "PATCH") == 1 + summary.checkpoints_written


def test_without_permission_it_logs_once_and_training_goes_on(api, cluster, tmp_path, caplog):
    api.put(gpu_pod("ml", "train-0", node="n"))
    api.forbid("patch", "pods")
    pod = OwnPod(cluster().client, "ml", "train-0")
    with caplog.at_level(logging.WARNING, logger="gpu_policy.kubernetes.write.own_pod"):
        summary = run_step_budget(str(tmp_path), 10, 10, *EXAMPLE, pod=pod)
        pod.note_checkpoint(10, 0.1)
    assert summary.last_step == 10 and len(caplog.records) == 1 and "refused (403)" in caplog.records[0].message
    assert api.calls("/api/v1/namespaces/ml/pods/train-0", "PATCH") == 1


def test_outside_a_cluster_nothing_is_written(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    pod = OwnPod.here()
    assert pod.client is None
    pod.note_checkpoint(3, 0.5)  # no error, no request
