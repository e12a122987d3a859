"""Driving `gpu-policy controller` in tests: turn by turn on the fake clock, against the fake
API server through the real client, its watches real threads that end by themselves."""

from __future__ import annotations

import time

import yaml

from gpu_policy.controller import Controller, ControllerSettings
from gpu_policy.controller.metrics import Metrics
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.transport.reporting import Report
from tests.kubernetes.fake import FakeScheduler
from tests.kubernetes.objects import gpu_pod, node_object
from gpu_policy.model import Node

DEADLINE_S = 60.0  # generous: a loaded machine still finishes, a hung test still ends


def cluster_of(api, nodes: int = 4, gpus: int = 8, queues: list[dict] | None = None, namespace: str = "jobs",
               labels: dict[str, dict] | None = None, policy: dict | None = None) -> None:
    for i in range(1, nodes + 1):
        api.put(node_object(Node(name=f"n{i}", gpus=gpus, labels=(labels or {}).get(f"n{i}", {}))))
    api.put({"kind": "Namespace", "metadata": {"name": namespace, "labels": {"gpu-policy.io/managed": "true"}}})
    queues = queues or [{"name": "a", "deserved": nodes * gpus // 2}, {"name": "b", "deserved": nodes * gpus // 2}]
    data = {names.QUEUES_KEY: yaml.safe_dump(queues), **({names.POLICY_KEY: yaml.safe_dump(policy)} if policy else {})}
    api.put({"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": names.DEFAULT_NAMESPACE},
             "data": data})


def gated_pod(name: str, queue: str, gpus: int = 1, job: str | None = None, replicas: int | None = None,
              gates: tuple[str, ...] = (names.ADMISSION_GATE,), namespace: str = "jobs", **spec) -> dict:
    labels = {names.QUEUE_LABEL: queue, **({names.JOB_LABEL: job} if job else {})}
    notes = {names.REPLICAS_ANNOTATION: str(replicas)} if replicas else {}
    spec.setdefault("tolerations", [{"key": names.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}])
    return gpu_pod(namespace, name, gpus, labels=labels, annotations=notes,
                   schedulingGates=[{"name": g} for g in gates], **spec)


def counted_cluster(cluster, metrics: Metrics, answered: Report | None = None, **settings):
    """The fake cluster through an ApiClient whose requests `metrics` counts (as `gpu-policy controller` opens it);
    `answered(method, url, query, code)` runs in the requesting thread after each answer (a slow API server
    takes fake time there)."""
    plain = cluster(**settings)
    return cluster(api_client=metrics.counted_client(plain.api_client.configuration, answered),
                   default_namespace=plain.default_namespace, **settings)


def new_controller(cluster, answered: Report | None = None, kube: dict | None = None, **settings) -> Controller:
    """A controller on the fake cluster (its settings `kube`, a 15 s lease unless told), started."""
    metrics = Metrics()
    controller = Controller(counted_cluster(cluster, metrics, answered, **{"lease_duration_s": 15.0, **(kube or {})}),
                            ControllerSettings(**{"debounce_s": 0.2, "watch_timeout_s": 2.0, **settings}),
                            metrics=metrics)
    controller.start()
    return controller


def kill(controller: Controller) -> None:
    """What SIGKILL does to a replica, as the Lease sees it: no more turns, no more renewals, the
    Lease not released (its watches end by themselves)."""
    controller.stop.set()
    if controller.renewer is not None:
        controller.renewer.close()


def settle(controller: Controller, fake_time, done=None, turns: int = 3) -> None:
    """Take in what the watches deliver and turn, each turn half a second of fake time, until
    `done()`, or (with no `done`) until `turns` turns in a row brought nothing new."""
    deadline, quiet = time.monotonic() + DEADLINE_S, 0
    while time.monotonic() < deadline:
        taken = controller.take_changes(wait_s=0.3)
        fake_time.now += 0.5
        planned = controller.step()
        if done is not None:
            if done():
                return
            continue
        quiet = 0 if taken or planned else quiet + 1
        if quiet >= turns:
            return
    raise AssertionError("the controller did not settle within the deadline")


def sees(controller: Controller, done) -> None:
    """Take in what the watches deliver, without turning, until `done()`."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, "the watches did not deliver within the deadline"
        controller.take_changes(wait_s=0.3)


def described(api, namespace: str, pod: str) -> list[dict]:
    """The pod's Events, oldest first, as `kubectl describe pod` lists them."""
    return sorted((e for e in api.objects("events", namespace, group="events.k8s.io")
                   if e["regarding"]["name"] == pod), key=lambda e: e["eventTime"])


def not_admitted_note(api, namespace: str, pod: str) -> str:
    """The note of the pod's one Event, which must be the Warning that it is not admitted."""
    (said,) = described(api, namespace, pod)
    assert (said["reason"], said["type"]) == ("GpuPolicyNotAdmitted", "Warning")
    return said["note"]


def released(api, namespace: str = "jobs") -> dict[str, str]:
    """Pod name -> the node gpu-policy released it onto (gate gone, hostname selected)."""
    out = {}
    for pod in api.objects("pods", namespace):
        gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
        host = (pod["spec"].get("nodeSelector") or {}).get(names.HOSTNAME_LABEL)
        if names.ADMISSION_GATE not in gates and host:
            out[pod["metadata"]["name"]] = host
    return out


def bind_released(api) -> int:
    """The stand-in kube-scheduler's pass (newest pod first, as under load): it binds every
    pod with no gate where its selectors, taints and free GPUs allow; returns how many."""
    return len(FakeScheduler(api, newest_first=True).schedule_once())


def json_patches(api, name: str) -> int:
    """JSON patches (releases) sent for the pod."""
    return sum(1 for r in api.requests if r.method == "PATCH" and r.path.endswith(f"/pods/{name}"))
