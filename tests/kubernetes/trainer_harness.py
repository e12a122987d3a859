"""A training pod whose trainer is a real process (tests/kubernetes/pod_trainer.py, the example
trainer), with the kubelet's part played by the test: the downward-API annotations file follows
the pod's annotations (rewritten by an atomic symlink swap, tests/checkpoint/kubelet.py), a pod
being deleted gets SIGTERM, and it is gone from the API server once its process has ended."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpu_policy.checkpoint.lock import LOCK_FILE
from gpu_policy.kubernetes import names
from tests.checkpoint.kubelet import write_volume
from tests.checkpoint.test_faults import ENV
from tests.kubernetes.controller_harness import DEADLINE_S
from tests.kubernetes.objects import gpu_pod

HERE = Path(__file__).parent


class TrainerPod:
    """The pod `namespace/name` bound to `node`, in `queue`, asking for `gpus`, with its own grace
    period `grace_s` and the annotations `notes`; `mounted`: whether it has the annotations volume
    (a trainer without one never sees a request)."""

    def __init__(self, api, kubeconfig: str, folder: Path, name: str = "trainer-0", namespace: str = "a",
                 queue: str = "team-a", gpus: int = 8, node: str = "n", grace_s: int = 10, mounted: bool = True,
                 notes: dict[str, str] | None = None):
        self.api, self.kubeconfig, self.namespace, self.name = api, kubeconfig, namespace, name
        self.volume, self.checkpoints, self.mounted = folder / "podinfo", folder / "checkpoints", mounted
        pod = gpu_pod(namespace, name, gpus=gpus, node=node, labels={names.QUEUE_LABEL: queue},
                      annotations=dict(notes or {}), terminationGracePeriodSeconds=grace_s)
        self.uid = api.put(pod)["metadata"]["uid"]
        self.shown: dict | None = None
        self.proc: subprocess.Popen | None = None
        self.stopped_with: int | None = None  # the grace period of the eviction that stopped it
        self.log = folder / "trainer.log"
        folder.mkdir(parents=True, exist_ok=True)
        self.sync()

    def start(self, steps: int = 10 ** 6, step_seconds: float = 0.01) -> TrainerPod:
        """Start the trainer; return once it trains (it holds its checkpoints' writer lock)."""
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "pod_trainer.py"), "--kubeconfig", self.kubeconfig,
             "--pod", f"{self.namespace}/{self.name}", "--pod-info", str(self.volume / "annotations"),
             "--dir", str(self.checkpoints), "--steps", str(steps), "--step-seconds", str(step_seconds)],
            stdout=subprocess.PIPE, stderr=self.log.open("w"), env=ENV)
        wait_for(lambda: (self.checkpoints / LOCK_FILE).exists() or self.proc.poll() is not None, "the trainer to start")
        return self

    def pod(self) -> dict | None:
        return self.api.get("pods", self.name, self.namespace)

    def annotations(self) -> dict[str, str]:
        return ((self.pod() or {}).get("metadata") or {}).get("annotations") or {}

    def sync(self) -> None:
        """One pass of the kubelet over this pod."""
        pod = self.pod()
        if pod is None:
            return
        meta = pod["metadata"]
        if self.mounted and meta.get("annotations", {}) != self.shown:
            self.shown = dict(meta.get("annotations", {}))
            write_volume(self.volume, self.shown)
        if meta.get("deletionTimestamp") and self.proc is not None:
            if self.stopped_with is None:
                self.stopped_with = meta["deletionGracePeriodSeconds"]
                self.proc.send_signal(signal.SIGTERM)
            elif self.proc.poll() is not None:
                self.api.delete("pods", self.name, self.namespace)  # its containers have exited: the pod is gone

    def summary(self, timeout_s: float = DEADLINE_S) -> tuple[int, dict]:
        """The trainer's exit status and summary, once it has ended."""
        out, _ = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, json.loads(out.decode().strip().splitlines()[-1])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def resume(checkpoints: Path, steps: int) -> dict:
    """`gpu-policy train-example` on the same checkpoints, outside a cluster: its summary."""
    done = subprocess.run([sys.executable, "-m", "gpu_policy.cli", "train-example", "--checkpoint-dir", str(checkpoints),
                           "--steps", str(steps)], capture_output=True, env=ENV, timeout=DEADLINE_S)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def wait_for(done, what: str) -> None:
    """Wait (real time, polling) until `done()`; fail after a generous deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
