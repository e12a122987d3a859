"""`k8s://`: a live Kubernetes cluster as a gpu-policy cluster (docs/kubernetes.md).

Observing: one paginated LIST of nodes and of unfinished pods, a GET of the queues
ConfigMap (or a LIST of KAI-Scheduler queues when it does not exist), a GET of the
reservations ConfigMap, and a LIST of namespaces only when some GPU pod names no queue
itself or a queue chooses its users by namespace label; when a node is labelled composable,
a GET of the composable ConfigMap and one LIST of ComposabilityRequests. Never Secrets, never one request per pod.

Acting (spec "Writing"): under the Lease `gpu-policy-planner`, GPUs are attached and
detached through ComposabilityRequests, victims are annotated and evicted, and moved jobs
and starting pipeline steps get reservations. A step that starts on GPUs being attached
waits for their requests (`attach_waiter`), without the lease.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Callable

from gpu_policy.model.cluster import Observation, Outcome
from gpu_policy.errors import ScenarioError
from gpu_policy.kubernetes.write.attach import RequestWaiter, RequestWriter, roll_back
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.transport.connect import connect
from gpu_policy.kubernetes.write.evict import evict_job, unmark
from gpu_policy.kubernetes.read.isolate import read_each
from gpu_policy.kubernetes.write.lease import PlanningLease, new_identity
from gpu_policy.kubernetes.read.look import look
from gpu_policy.kubernetes.read.nodes import read_node
from gpu_policy.kubernetes.read.pods import PodRef, read_pod
from gpu_policy.kubernetes.read.requests import RequestView
from gpu_policy.kubernetes.read.reservations import Reservation, key_of
from gpu_policy.kubernetes.write.reservations import write_reservations
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.read.settle import DevicePluginLag
from gpu_policy.kubernetes.read.shape import NODE, POD
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.model import Job
from gpu_policy.model.plan import JobDecision, Plan

#: why a broken gang's pods are evicted (gpu_policy.kubernetes.read.workloads)
BROKEN_GANG_REASON = "broken gang: fewer of its pods hold GPUs than its minimum size; evicted whole to restart whole"
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
                 monotonic: Callable[[], float] = time.monotonic):
        self.url = url
        self.settings = (settings or KubernetesSettings()).validate()
        default_namespace = None
        if api_client is None:
            api_client, default_namespace = connect(url.removeprefix("k8s://") or None, kubeconfig, url)
        #: where a step's job lives when its name gives no namespace
        self.default_namespace = namespace or default_namespace or "default"
        self.api_client = api_client
        self.client = KubeClient(api_client, url, self.settings, sleep, monotonic)
        # the lease renews from its own thread: its own client keeps the observation's counts exact
        self.lease = PlanningLease(KubeClient(api_client, url, self.settings, sleep, monotonic), new_identity(),
                                   clock, sleep, monotonic)
        self._clock, self._sleep, self._monotonic = clock, sleep, monotonic
        #: which Online devices each composable node's allocatable counts, across this cluster's looks
        self.device_plugin_lag = DevicePluginLag(self.settings.composition_settle_s)
        #: each ComposabilityRequest as a write answered (name, answer): the controller's cache takes it in
        self.on_request_written: Callable[[str, dict], None] = lambda name, body: None

    @classmethod
    def from_url(cls, url: str, **options) -> KubernetesCluster:
        return cls(url, **options)

    def observe(self) -> Observation:
        self.client.begin_round()  # a round: this observation and the acting on its plan
        began, before = time.perf_counter(), dataclasses.replace(self.client.stats)
        gpu = self.settings.gpu_resource
        nodes, bad_nodes = read_each(self.client.list_nodes(), "node", NODE, lambda n: read_node(n, gpu))
        pods, bad_pods = read_each(self.client.list_pods(), "pod", POD, lambda p: read_pod(p, gpu))
        snap, warnings, bad = look(self.client, self.settings, nodes, pods, self._clock(), self.url,
                                   self.device_plugin_lag, bad_nodes + bad_pods)
        cost = self.client.stats.since(before)
        observed = {"source": self.url, "api_calls": cost.calls, "objects": cost.objects, "bytes": cost.bytes,
                    "seconds": round(time.perf_counter() - began, 3)}
        return Observation(snap.scenario, observed, warnings + snap.warnings, backend=snap, object_warnings=bad)

    def planning(self):
        """Hold the planning lease (observe -> decide -> act, one planner at a time)."""
        return self.lease.held()

    def carry_out(self, plan: Plan, observation: Observation, execute: bool, step: Job | None = None) -> list[Outcome]:
        snap: Snapshot = observation.backend
        check = self.lease.check if execute else (lambda: None)
        # every reservation this plan may write, checked before the first action (nothing half done)
        moved = {d.name: self._reservation(observation.scenario.jobs, d) for d in plan.jobs
                 if d.action == "move" and d.name not in snap.reservations}
        started = self._reservation([step], plan.job(step.name)) \
            if step is not None and plan.job(step.name).action == "start" else None
        for r in [*moved.values(), *([started] if started else [])]:
            r.check()
        outcomes, reserve, stale = self._compose(plan, snap, execute, check), [], set(snap.stale)
        victims = {d.name for d in plan.jobs if d.action in ("preempt", "move")}
        outcomes += [unmark(self.client, job, refs, check, execute) for job, refs in sorted(snap.marked.items())
                     if job not in victims and job not in snap.broken]
        outcomes += [self._evict(name, "preempt", BROKEN_GANG_REASON, pods, execute, check)
                     for name, pods in sorted(snap.broken.items())]
        for d in plan.jobs:
            if d.action not in ("preempt", "move"):
                continue
            if d.name in snap.reservations:  # a step that has no pods yet: give its GPUs back
                stale.add(snap.reservations[d.name].key)
                outcomes.append(Outcome(d.name, d.action, "done" if execute else "dry run", "its reservation is released"))
                continue
            outcome = self._evict(d.name, d.action, d.reason or d.action, snap.pods.get(d.name, []), execute, check)
            outcomes.append(outcome)
            if d.action == "move" and outcome.result != "blocked":
                reserve.append(moved[d.name])
        if started is not None:
            reserve.append(started)
        if execute and (reserve or stale):
            write_reservations(self.client, reserve, stale, check)
        until = time.strftime("%H:%M:%S", time.gmtime(self._clock() + self.settings.reservation_lifetime_s))
        outcomes += [Outcome(r.job_name, "reserve", "done" if execute else "dry run",
                             f"{r.gpus:g} GPUs x {r.replicas} on {', '.join(r.nodes)} until its pods are bound, "
                             f"at most until {until} UTC") for r in reserve]
        return outcomes

    def _evict(self, name: str, action: str, reason: str, pods: list[PodRef], execute: bool, check) -> Outcome:
        """Annotate and evict every pod of a job (all of a gang's together), or say so in a dry run."""
        if execute:
            return evict_job(self.client, name, action, reason, pods, check, self._sleep, self._monotonic)
        return Outcome(name, action, "dry run", f"would annotate and evict {len(pods)} pod"
                       f"{'s' if len(pods) != 1 else ''}: {reason}", [str(p) for p in pods])

    def _compose(self, plan: Plan, snap: Snapshot, execute: bool, check) -> list[Outcome]:
        """Roll back gpu-policy's requests that missed their deadline, then attach and detach."""
        if snap.composed is None:
            if plan.compositions:
                raise ValueError("the plan composes GPUs, but the cluster has no composition set up")
            return []
        composer = RequestWriter(self.client, snap.composed, self._clock(), check, self.on_request_written)
        outcomes = composer.roll_back_overdue() if execute else []
        return outcomes + [composer.carry_out(c, execute) for c in plan.compositions]

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
                texts = [roll_back(self.client, r, self._clock(), lease.check).detail for r in late]
                write_reservations(self.client, [], {key_of(step.name)}, lease.check)
            return texts

        return RequestWaiter(self.client, names, self._clock, give_up, failed or None)

    def _reservation(self, jobs: list[Job], decision: JobDecision) -> Reservation:
        job = next(j for j in jobs if j.name == decision.name)
        namespace, _, name = job.name.partition("/")
        return Reservation(namespace, name, job.queue, job.gpus, job.replicas, [r.node for r in decision.replicas],
                           [list(r.gpu_indices) for r in decision.replicas],
                           self._clock() + self.settings.reservation_lifetime_s, job.priority)

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
