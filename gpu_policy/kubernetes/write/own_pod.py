"""The pod a training step runs in, telling gpu-policy about itself (best effort).

After each checkpoint the checkpointed training writes `gpu-policy.io/last-checkpoint`
and `gpu-policy.io/checkpoint-save-s` (how long the save took) on its own pod, so victims are
chosen by the work they would really lose, and a victim asked to checkpoint is evicted as
soon as it has answered. A step launched by a pipeline that cannot label its pods (KFP's
labels are fixed when the pipeline is compiled) labels itself with its job and queue,
so observations recognise it and drop its reservation. Without a cluster, or without
permission, it logs once and goes on: training never fails for this.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timezone

from gpu_policy.errors import GpuPolicyError
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.transport.connect import connect, in_cluster, service_account_namespace
from gpu_policy.kubernetes.names import (CHECKPOINT_SAVE_S_ANNOTATION, JOB_LABEL, LAST_CHECKPOINT_ANNOTATION,
                                         QUEUE_LABEL)
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.model.checkpointing import rfc3339

log = logging.getLogger(__name__)


class OwnPod:
    """The pod `namespace/name` through `client` (None: not in a cluster, nothing is written)."""

    def __init__(self, client: KubeClient | None, namespace: str = "", name: str = ""):
        self.client, self.namespace, self.name = client, namespace, name
        self.gave_up = client is None

    @classmethod
    def here(cls) -> OwnPod:
        """This process's pod: $POD_NAME / $POD_NAMESPACE (the downward API), else the host
        name and the service account's namespace. Outside a pod, one that writes nothing."""
        if not in_cluster():
            return cls(None)
        try:
            api_client, _ = connect(None, None, "k8s://")
        except GpuPolicyError as e:
            log.warning("this pod cannot reach the API server (%s): gpu-policy will not see its checkpoints", e)
            return cls(None)
        # a short deadline: a busy API server never holds the training up for long
        client = KubeClient(api_client, "k8s://", KubernetesSettings(deadline_s=10, timeout_s=5))
        return cls(client, os.environ.get("POD_NAMESPACE") or service_account_namespace(),
                   os.environ.get("POD_NAME") or socket.gethostname())

    def label_job(self, job: str, queue: str) -> None:
        """Label the pod as one of the job's (the job's name without its namespace) in `queue`."""
        self._patch(labels={JOB_LABEL: job.rpartition("/")[2], QUEUE_LABEL: queue})

    def note_checkpoint(self, step: int, seconds: float | None, at: datetime | None = None) -> None:
        """Record that a checkpoint of `step` was saved `at` (default now) in `seconds` (None:
        not measured, e.g. a request answered with the checkpoint already saved)."""
        notes = {LAST_CHECKPOINT_ANNOTATION: rfc3339(at or datetime.now(timezone.utc))}
        if seconds is not None:
            notes[CHECKPOINT_SAVE_S_ANNOTATION] = f"{seconds:.2f}"
        self._patch(annotations=notes)

    def _patch(self, **metadata) -> None:
        if self.gave_up:
            return
        try:
            if self.client.patch_pod_metadata(self.namespace, self.name, **metadata) is None:
                raise GpuPolicyError(f"pod {self.namespace}/{self.name} does not exist")
        except GpuPolicyError as e:
            self.gave_up = True
            log.warning("cannot write to this pod (%s); training goes on, but gpu-policy will judge its lost work "
                        "without it", e)
