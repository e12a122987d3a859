"""A live cluster for the pipeline tests: the fake API server with the admission policy, the
stand-in Kubeflow Trainer, kube-scheduler and kubelet, and gpu-policy's real controller, all
turning in one background thread while a KFP pipeline or an Airflow DAG runs its steps.

Each turn: the controller takes in what its watches delivered, the fake clock moves half a
second, the controller steps (plans and acts when due), the scheduler binds what was
released, the kubelet ends pods that have run `run_turns` turns, and the trainer reconciles.
`releases` keeps, after each turn, which pods gpu-policy had released, so a test can tell
that a gang was released in one turn. The thread stops at `stop()` (or the `with` block's
end), and by itself after a generous deadline, so a hung test still ends.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from gpu_policy.controller import Controller, ControllerSettings
from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings
from tests.kubernetes.conftest import FakeTime
from tests.kubernetes.controller_harness import cluster_of, released
from tests.kubernetes.fake import FakeScheduler
from tests.kubernetes.fake_trainer import FakeTrainer

DEADLINE_S = 300.0


class LiveCluster:
    def __init__(self, api, kubeconfig: str, namespace: str = "ml", nodes: int = 4, gpus: int = 8,
                 run_turns: int = 3, hold: Callable[[], bool] | None = None):
        self.api, self.namespace, self.run_turns = api, namespace, run_turns
        self.hold = hold or (lambda: False)
        cluster_of(api, nodes, gpus, namespace=namespace)
        api.add_resource("events.k8s.io", "v1", "events", "Event", True)
        api.gate_gpu_pods = True  # the admission policy of deploy/: GPU pods in `namespace` are gated at create
        self.trainer = FakeTrainer(api, on_read=False)  # it takes its turns here, one per turn
        self.time = FakeTime()
        clocks = {"sleep": self.time.sleep, "monotonic": self.time.monotonic, "clock": self.time.time}
        self.controller = Controller(KubernetesCluster("k8s://", kubeconfig=kubeconfig,
                                                       settings=KubernetesSettings(backoff_jitter=0), **clocks),
                                     ControllerSettings(debounce_s=0.2, watch_timeout_s=2.0))
        self.releases: list[dict[str, str]] = []  # after each turn: pod -> the node gpu-policy released it onto
        self.errors: list[BaseException] = []
        self._ran: dict[str, int] = {}  # running pod -> turns it has run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._turn_until_stopped, name="live-cluster", daemon=True)

    def __enter__(self) -> LiveCluster:
        self.controller.start()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.controller.stop.set()
        if self.errors:
            raise AssertionError(f"the live cluster's thread failed: {self.errors[0]!r}") from self.errors[0]

    def _turn_until_stopped(self) -> None:
        deadline = time.monotonic() + DEADLINE_S
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                self.controller.take_changes(wait_s=0.05)
                self.time.now += 0.5
                if not self.hold():
                    self.controller.step()
                self.releases.append(released(self.api, self.namespace))
                FakeScheduler(self.api).schedule_once()
                self._kubelet()
                self.trainer.reconcile()
        except Exception as e:  # the test's thread reports it (`stop`)
            self.errors.append(e)

    def _kubelet(self) -> None:
        """Bound pods run (their containers start), and end when they have run `run_turns`
        turns: their containers exited 0."""
        for pod in self.api.objects("pods", self.namespace):
            name, status = pod["metadata"]["name"], pod.get("status") or {}
            if status.get("phase") != "Running":
                continue
            self._ran[name] = self._ran.get(name, 0) + 1
            ended = self._ran[name] >= self.run_turns
            if status.get("containerStatuses") and not ended:
                continue
            state = {"terminated": {"exitCode": 0, "reason": "Completed"}} if ended else {"running": {}}
            status["containerStatuses"] = [{"name": c["name"], "image": c.get("image", ""), "imageID": "",
                                            "ready": not ended, "restartCount": 0, "state": state}
                                           for c in pod["spec"]["containers"]]
            status["phase"] = "Succeeded" if ended else "Running"
            self.api.put(pod)

    def released_together(self, pods: set[str]) -> bool:
        """Whether `pods` went from none released to all released in one turn, never part of them."""
        counts = [len(pods & set(turn)) for turn in self.releases]
        return bool(counts) and counts[-1] == len(pods) and all(c in (0, len(pods)) for c in counts)
