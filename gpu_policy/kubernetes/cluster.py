"""`k8s://`: a live Kubernetes cluster as a gpu-policy cluster (docs/kubernetes.md).

Observing: one paginated LIST of nodes and of unfinished pods, a GET of the queues
ConfigMap (or a LIST of KAI-Scheduler queues when it does not exist), a GET of the
reservations ConfigMap, and a LIST of namespaces only when some GPU pod names no queue
itself or a queue chooses its users by namespace label; when a node is labelled composable,
a GET of the composable ConfigMap and one LIST of ComposabilityRequests. Never Secrets, never one request per pod.

Acting (spec "Writing"): `actuator`, the one actuator of a live cluster
(gpu_policy.kubernetes.write.actuator), fenced by the Lease `gpu-policy-planner` that
`planning()` holds. A step that starts on GPUs being attached waits for their requests
(`attach_waiter`), without the lease.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from typing import Callable

from gpu_policy.errors import ScenarioError
from gpu_policy.kubernetes.clocks import Clocks, wait_for
from gpu_policy.kubernetes.read.isolate import read_each
from gpu_policy.kubernetes.read.look import look
from gpu_policy.kubernetes.read.nodes import read_node
from gpu_policy.kubernetes.names import ADMISSION_GATE
from gpu_policy.kubernetes.read.pods import gates_of, read_pod
from gpu_policy.kubernetes.read.requests import RequestView
from gpu_policy.kubernetes.read.reservations import key_of
from gpu_policy.kubernetes.read.settle import DevicePluginLag
from gpu_policy.kubernetes.read.shape import NODE, POD
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.transport.connect import connect
from gpu_policy.kubernetes.write.actuator import KubernetesActuator
from gpu_policy.kubernetes.write.attach import RequestWaiter, roll_back
from gpu_policy.kubernetes.write.events import EventWriter
from gpu_policy.kubernetes.write.lease import PlanningLease, new_identity
from gpu_policy.kubernetes.write.reservations import write_reservations
from gpu_policy.model import Job
from gpu_policy.model.cluster import Observation, Outcome
from gpu_policy.model.plan import Plan

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class KubernetesCluster:
    """The cluster behind `url` (``k8s://`` or ``k8s://CONTEXT``), or behind a ready
    `api_client` (an Airflow connection's). `kubeconfig` defaults to $KUBECONFIG or
    ~/.kube/config; inside a pod, ``k8s://`` uses the pod's service account."""

    simulated_telemetry = False
    executes_by_default = True

    def __init__(self, url: str = "k8s://", *, kubeconfig: str | None = None,
                 settings: KubernetesSettings | None = None, api_client=None, namespace: str | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic,
                 wait: Callable[[threading.Event, float], bool] = wait_for):
        self.url = url
        #: the clocks its reading and acting run on (the controller runs on the same)
        self.clocks = Clocks(clock, monotonic, sleep, wait)
        self.settings = (settings or KubernetesSettings()).validate()
        default_namespace = None
        if api_client is None:
            api_client, default_namespace = connect(url.removeprefix("k8s://") or None, kubeconfig, url,
                                                    self.settings.max_requests_in_flight)
        #: where a step's job lives when its name gives no namespace
        self.default_namespace = namespace or default_namespace or "default"
        self.api_client = api_client
        self.client = KubeClient(api_client, url, self.settings, sleep, monotonic)
        # the lease renews from its own thread: its own client keeps the observation's counts exact
        self.lease = PlanningLease(KubeClient(api_client, url, self.settings, sleep, monotonic), new_identity(),
                                   self.clocks)
        self.client.fence = self.lease.check  # a write sent again (429, 5xx) passes the fence again
        #: which Online devices each composable node's allocatable counts, across this cluster's looks
        self.device_plugin_lag = DevicePluginLag(self.settings.composition_settle_s)
        #: the last look's gated and unreadable pods as listed: what a release and its Events read
        self._listed: dict[tuple[str, str], dict] = {}
        #: what carries plans out for the one-shot commands and the steps, fenced by the lease
        #: (the controller builds its own, on its cache: gpu_policy.controller.loop)
        self.actuator = KubernetesActuator(self.client, self.settings, self.lease.check,
                                           EventWriter(self.client, self.lease.identity, clock, self.lease.check),
                                           self.clocks, read_pod=self._read_pod)

    @classmethod
    def from_url(cls, url: str, **options) -> KubernetesCluster:
        return cls(url, **options)

    def observe(self) -> Observation:
        self.client.begin_round()  # a round: this observation and the acting on its plan
        began, before = time.perf_counter(), dataclasses.replace(self.client.stats)
        gpu = self.settings.gpu_resource
        nodes, bad_nodes = read_each(self.client.list_nodes(), "node", NODE, lambda n: read_node(n, gpu))
        listed = self.client.list_pods()
        pods, bad_pods = read_each(listed, "pod", POD, lambda p: read_pod(p, gpu))
        self._listed = _gated_or_left_out(listed, {w.pod for w in bad_pods if w.pod is not None})
        snap, warnings, bad = look(self.client, self.settings, nodes, pods, self.clocks.wall(), self.url,
                                   self.device_plugin_lag, bad_nodes + bad_pods)
        cost = self.client.stats.since(before)
        observed = {"source": self.url, "api_calls": cost.calls, "objects": cost.objects, "bytes": cost.bytes,
                    "seconds": round(time.perf_counter() - began, 3)}
        return Observation(snap.scenario, observed, warnings + snap.warnings, backend=snap, object_warnings=bad)

    def _read_pod(self, namespace: str, name: str) -> dict | None:
        """A pod as the last look listed it where it was gated or left out (a release and its Event
        need no GET per pod: a release's patch tests the gate it removes, so a pod changed since is
        refused, not harmed); any other pod (a victim before its eviction) by a GET."""
        pod = self._listed.get((namespace, name))
        return pod if pod is not None else self.client.read_pod(namespace, name)

    def planning(self):
        """Hold the planning lease (observe -> decide -> act, one planner at a time)."""
        return self.lease.held()

    def attach_waiter(self, plan: Plan, observation: Observation, step: Job,
                      outcomes: list[Outcome]) -> RequestWaiter | None:
        """The requests the started step waits for: those attaching GPUs to its nodes where
        it runs on GPUs that are not there yet (asked for now or before)."""
        composed = observation.backend.composed
        if composed is None:
            return None
        nodes = composed.waits_on(plan.job(step.name), observation.scenario.nodes)
        if not nodes:
            return None
        names = sorted({r.name for (node, _), r in composed.requests.items() if node in nodes and not r.complete} |
                       {o.pods[0] for o in outcomes if o.action == "attach" and o.job in nodes})
        failed = "; ".join(o.detail for o in outcomes if o.action == "attach" and o.job in nodes and o.result == "failed")

        def give_up(late: list[RequestView]) -> list[str]:
            with self.lease.held() as lease:
                texts = [roll_back(self.client, r, self.clocks.wall(), lease.check).detail for r in late]
                write_reservations(self.client, [], {key_of(step.name)}, lease.check)
            return texts

        return RequestWaiter(self.client, names, self.clocks.wall, give_up, failed or None)

    def step_job(self, job: Job) -> Job:
        """The job named ``NAMESPACE/NAME``; a bare NAME lives in the default namespace (the
        pod's own inside the cluster, else the kubeconfig context's). NAME is also the
        `gpu-policy.io/job` label of the step's pods, so it must be a label value."""
        namespace, _, name = job.name.rpartition("/")
        namespace = namespace or self.default_namespace
        if not _NAMESPACE.match(namespace) or not _LABEL_VALUE.match(name):
            raise ScenarioError(self.url, "job", "must be NAME or NAMESPACE/NAME, with a Kubernetes namespace and "
                                                 "a label value (letters, digits, -_., at most 63) as NAME, "
                                                 f"got {job.name!r}")
        return dataclasses.replace(job, name=f"{namespace}/{name}")


def _gated_or_left_out(pods: list, left_out: set[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """(namespace, name) -> pod, of the listed pods gpu-policy's gate holds or the look left out."""
    out = {}
    for pod in pods:
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        spec = pod.get("spec") if isinstance(pod, dict) else None
        if not isinstance(meta, dict) or not isinstance(spec, dict):
            continue
        key = (meta.get("namespace"), meta.get("name"))
        if not all(isinstance(part, str) for part in key):
            continue  # no pod a release or an Event could name (the look left it out)
        gates = spec.get("schedulingGates")
        if key in left_out or (isinstance(gates, list) and ADMISSION_GATE in gates_of(spec)):
            out[key] = pod
    return out
