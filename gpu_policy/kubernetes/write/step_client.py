"""A pipeline step's requests on a live cluster, all in its own namespace, and how it waits.

A step creates its training pod (gated_step.py) or TrainJob (trainjob_step.py) and then only
reads: that object, its pods and the Events gpu-policy's controller writes about them, every
`poll_interval_s` until what it waits for has come or its wait is over (`poll`). Every request
is declared in `STEP_PERMISSIONS`, a Role in the step's namespace; none is cluster-wide.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Callable, TypeVar

from gpu_policy.kubernetes.names import JOBSET_LABEL, TRAINER_GROUP, TRAINER_VERSION, TRAINJOBS
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.transport.connect import connect
from gpu_policy.kubernetes.transport.permissions import Permission, needs
from gpu_policy.kubernetes.write.events import CONTROLLER

#: what a pipeline step's account needs, all in its own namespace (`own_namespace` here means
#: the step's namespace, not gpu-policy's)
STEP_PERMISSIONS: set[Permission] = set()

T = TypeVar("T")


class StepClient(KubeClient):
    """The step's requests: its own pod or TrainJob, that TrainJob's pods and their Events."""

    def __init__(self, api_client, where: str, settings, **kwargs):
        super().__init__(api_client, where, settings, **kwargs)
        self._events = self._models.EventsV1Api(api_client)

    @needs("create", "pods", own_namespace=True, registry=STEP_PERMISSIONS)
    def create_own_pod(self, namespace: str, body: dict) -> dict | None:
        """Create it; None when a pod of that name exists already (a retried task's)."""
        name = body["metadata"]["name"]
        answer = self._request(f"create pod {namespace}/{name}", lambda **kw: self._core.create_namespaced_pod(
            namespace=namespace, body=body, **kw), accept={409})
        return None if answer.status == 409 else answer.body

    @needs("get", "pods", own_namespace=True, registry=STEP_PERMISSIONS)
    def read_own_pod(self, namespace: str, name: str) -> dict | None:
        answer = self._request(f"get pod {namespace}/{name}", lambda **kw: self._core.read_namespaced_pod(
            name=name, namespace=namespace, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @needs("list", "events", group="events.k8s.io", own_namespace=True, registry=STEP_PERMISSIONS)
    def list_pod_events(self, namespace: str, name: str) -> list[dict]:
        """The events.k8s.io Events about the pod (a field selector: the API server filters them)."""
        return self._list(f"list Events of pod {namespace}/{name}", lambda **kw: self._events.list_namespaced_event(
            namespace=namespace, field_selector=f"regarding.kind=Pod,regarding.name={name}", **kw))

    @needs("create", TRAINJOBS, group=TRAINER_GROUP, own_namespace=True, registry=STEP_PERMISSIONS)
    def create_train_job(self, namespace: str, body: dict) -> dict | None:
        """Create it; None when a TrainJob of that name exists already (a retried task's)."""
        name = body["metadata"]["name"]
        answer = self._request(f"create TrainJob {namespace}/{name}", lambda **kw: self._custom.create_namespaced_custom_object(
            TRAINER_GROUP, TRAINER_VERSION, namespace, TRAINJOBS, body, **kw), accept={409})
        return None if answer.status == 409 else answer.body

    @needs("get", TRAINJOBS, group=TRAINER_GROUP, own_namespace=True, registry=STEP_PERMISSIONS)
    def read_train_job(self, namespace: str, name: str) -> dict | None:
        answer = self._request(f"get TrainJob {namespace}/{name}", lambda **kw: self._custom.get_namespaced_custom_object(
            TRAINER_GROUP, TRAINER_VERSION, namespace, TRAINJOBS, name, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @needs("list", TRAINJOBS, group=TRAINER_GROUP, own_namespace=True, registry=STEP_PERMISSIONS)
    def list_train_jobs(self, namespace: str, label_selector: str) -> list[dict]:
        """The TrainJobs with these labels (a retried task's search for the one it created)."""
        return self._list(f"list TrainJobs in {namespace} ({label_selector})",
                          lambda **kw: self._custom.list_namespaced_custom_object(
                              TRAINER_GROUP, TRAINER_VERSION, namespace, TRAINJOBS, label_selector=label_selector, **kw))

    @needs("list", "pods", own_namespace=True, registry=STEP_PERMISSIONS)
    def list_train_job_pods(self, namespace: str, name: str) -> list[dict]:
        """The pods of the TrainJob's JobSet (named as the TrainJob)."""
        return self._list(f"list pods of TrainJob {namespace}/{name}", lambda **kw: self._core.list_namespaced_pod(
            namespace=namespace, label_selector=f"{JOBSET_LABEL}={name}", **kw))


def open_step_client(url: str = "k8s://", kubeconfig: str | None = None, settings: KubernetesSettings | None = None,
                     api_client=None, **clocks) -> tuple[StepClient, str]:
    """The step's client for `url` (k8s:// or k8s://CONTEXT; or `api_client`, e.g. an Airflow
    connection's) and the namespace its pod goes to by default (the context's, or the pod's own)."""
    namespace = None
    if api_client is None:
        api_client, namespace = connect(url.removeprefix("k8s://") or None, kubeconfig, url)
    return StepClient(api_client, url, (settings or KubernetesSettings()).validate(), **clocks), namespace or "default"


@dataclass
class Waited:
    """What a step waited for: whether the controller `released` it, and why, in the words of
    gpu-policy's newest Event about it (`event` its reason, e.g. GpuPolicyWaiting; `reason` its
    note), after `waited_s` seconds."""

    released: bool = False
    reason: str = ""
    event: str = ""
    waited_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def said(self) -> str:
        return f" ({self.event}: {self.reason})" if self.reason else ""


def newest_reason(events: list[dict]) -> tuple[str, str]:
    """(reason, note) of gpu-policy's most recent Event among `events`; ("", "") when none."""
    ours = [e for e in events if e.get("reportingController") == CONTROLLER]
    if not ours:
        return "", ""
    newest = max(ours, key=_last_seen)
    return str(newest.get("reason") or ""), str(newest.get("note") or "")


def _last_seen(event: dict) -> datetime:
    """When an Event was last observed: a series' last time, else its event time, else its creation."""
    stamp = ((event.get("series") or {}).get("lastObservedTime") or event.get("eventTime")
             or (event.get("metadata") or {}).get("creationTimestamp") or "1970-01-01T00:00:00Z")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def poll(look: Callable[[float], T], done: Callable[[T], bool], max_wait_s: float, poll_interval_s: float,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
         line: Callable[[T], str] | None = None, progress: Callable[[str], None] | None = None) -> T:
    """`look(seconds waited)` every `poll_interval_s` until `done` with what it saw, or until
    another look would pass `max_wait_s` (then the last look's answer). Each new `line` of
    what it saw goes to `progress`."""
    began, said = clock(), None
    while True:
        seen = look(clock() - began)
        if progress and line and line(seen) != said:
            said = line(seen)
            progress(said)
        if done(seen) or clock() - began + poll_interval_s > max_wait_s:
            return seen
        sleep(poll_interval_s)
