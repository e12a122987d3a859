"""Triggers that wait for gpu-policy's controller in Airflow's triggerer, not in a worker slot.

A deferrable step (``deferrable=True`` on GatedKubernetesPodOperator and
GatedTrainJobOperator) creates its pod or TrainJob, then hands the wait to one of these:
`GatedPodTrigger` until the controller releases the pod; `TrainJobTrigger` until it has
released all the TrainJob's pods, or (``phase="end"``) until the TrainJob has ended. They read
through the cncf-kubernetes provider's async client (`AsyncKubernetesHook`, kubernetes_asyncio)
what the synchronous steps read (gpu_policy/kubernetes/write/step_client.py), every
`poll_interval_s`, and judge it with the same rules (gated_step.py, trainjob_step.py). Each
yields one event, ``status``:

- ``done``: what it waited for came; ``not_in_time``: it did not by `wait_until` (the step's
  own timeout); ``timeout``: the task's `execution_deadline` passed (Airflow does not enforce
  ``execution_timeout`` while a task is deferred; the operator passes its deadline, as
  KubernetesPodOperator does); ``error``: the object went or failed, or
  `MAX_FAILED_READS` reads in a row failed (``message`` says which);
- and what the last look saw (an Admission's, a GangAdmission's or a Finish's fields).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from functools import cached_property
from typing import Any, AsyncIterator

from aiohttp import ClientError
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
from airflow.triggers.base import BaseTrigger, TriggerEvent
from kubernetes_asyncio import client as async_client
from kubernetes_asyncio.client.exceptions import ApiException

from gpu_policy.errors import ClusterError
from gpu_policy.kubernetes.names import JOBSET_LABEL, TRAINER_GROUP, TRAINER_VERSION, TRAINJOBS
from gpu_policy.kubernetes.write.gated_step import admission_of
from gpu_policy.kubernetes.write.trainjob_step import finish_of, gang_admission, waiting_pod

__all__ = ["GatedPodTrigger", "TrainJobTrigger"]

#: reads that fail in a row (the API server unreachable, 5xx) before the trigger gives up
MAX_FAILED_READS = 3
#: seconds one request may take
REQUEST_TIMEOUT_S = 30.0


class _StepTrigger(BaseTrigger):
    """The wait both triggers share: the connection (as KubernetesPodTrigger takes it), the
    object, the poll and the deadlines (seconds since the epoch)."""

    def __init__(self, *, namespace: str, name: str, wait_until: float, poll_interval_s: float = 10.0,
                 execution_deadline: float | None = None, kubernetes_conn_id: str | None = None,
                 connection_extras: dict | None = None, config_dict: dict | None = None,
                 cluster_context: str | None = None, in_cluster: bool | None = None):
        super().__init__()
        self.kwargs = {"namespace": namespace, "name": name, "wait_until": wait_until,
                       "poll_interval_s": poll_interval_s, "execution_deadline": execution_deadline,
                       "kubernetes_conn_id": kubernetes_conn_id, "connection_extras": connection_extras,
                       "config_dict": config_dict, "cluster_context": cluster_context, "in_cluster": in_cluster}
        self.namespace, self.name = namespace, name
        self.wait_until, self.poll_interval_s, self.execution_deadline = wait_until, poll_interval_s, execution_deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", dict(self.kwargs)

    @cached_property
    def hook(self) -> AsyncKubernetesHook:
        k = self.kwargs
        return AsyncKubernetesHook(conn_id=k["kubernetes_conn_id"], in_cluster=k["in_cluster"],
                                   config_dict=k["config_dict"], cluster_context=k["cluster_context"],
                                   connection_extras=k["connection_extras"])

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async with self.hook.get_conn() as api:
                payload = await self._wait(api)
        except ClusterError as e:  # what it waited on went, or failed (one line)
            payload = {"status": "error", "message": str(e)}
        yield TriggerEvent({"namespace": self.namespace, "name": self.name, **payload})

    async def _wait(self, api) -> dict:
        began, said, failures, last = time.time(), None, 0, {}
        while True:
            if self.execution_deadline is not None and time.time() >= self.execution_deadline:
                return {"status": "timeout", "message": "the task's execution_timeout passed", **last}
            try:
                seen = await self.look(api, time.time() - began)
                failures = 0
            except (ApiException, ClientError, asyncio.TimeoutError) as e:
                failures += 1
                self.log.warning("reading %s/%s failed (%d of %d): %s", self.namespace, self.name, failures,
                                 MAX_FAILED_READS, _said(e))
                if failures >= MAX_FAILED_READS:
                    return {"status": "error", "message": f"{MAX_FAILED_READS} reads in a row failed, the last: "
                                                          f"{_said(e)}", **last}
            else:
                last = asdict(seen)
                if seen.line() != said:
                    said = seen.line()
                    self.log.info("%s", said)
                if self.done(seen):
                    return {"status": "done", **last}
            if time.time() + self.poll_interval_s > self.wait_until:
                return {"status": "not_in_time", **last}
            pause = self.poll_interval_s
            if self.execution_deadline is not None:
                pause = min(pause, max(self.execution_deadline - time.time(), 0))
            await asyncio.sleep(pause)

    async def look(self, api, waited_s: float):
        raise NotImplementedError

    def done(self, seen) -> bool:
        raise NotImplementedError

    @staticmethod
    async def _own(what: str, read):
        """What the `read` (a coroutine) gets; the object gone (404) is an error naming `what`."""
        try:
            return await read
        except ApiException as e:
            if e.status == 404:
                raise ClusterError(f"{what} was deleted while the step waited for it") from None
            raise

    async def _pod_events(self, api, pod: str) -> list[dict]:
        events = await async_client.EventsV1Api(api).list_namespaced_event(
            self.namespace, field_selector=f"regarding.kind=Pod,regarding.name={pod}",
            _request_timeout=REQUEST_TIMEOUT_S)
        return api.sanitize_for_serialization(events).get("items") or []


class GatedPodTrigger(_StepTrigger):
    """Until gpu-policy's controller releases the pod `namespace`/`name` (its gate gone)."""

    async def look(self, api, waited_s: float):
        pod = await self._own(f"pod {self.namespace}/{self.name}", async_client.CoreV1Api(api).read_namespaced_pod(
            self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S))
        return admission_of(api.sanitize_for_serialization(pod), await self._pod_events(api, self.name), waited_s)

    def done(self, seen) -> bool:
        return seen.released


class TrainJobTrigger(_StepTrigger):
    """Until gpu-policy's controller has released all the pods of the TrainJob
    `namespace`/`name` (``phase="release"``), or until the TrainJob has ended (``phase="end"``)."""

    def __init__(self, *, phase: str = "release", **kwargs):
        super().__init__(**kwargs)
        self.kwargs["phase"] = self.phase = phase

    async def look(self, api, waited_s: float):
        job = await self._own(f"TrainJob {self.namespace}/{self.name}",
                              async_client.CustomObjectsApi(api).get_namespaced_custom_object(
                                  TRAINER_GROUP, TRAINER_VERSION, self.namespace, TRAINJOBS, self.name,
                                  _request_timeout=REQUEST_TIMEOUT_S))
        if self.phase == "end":
            return finish_of(job)
        listed = await async_client.CoreV1Api(api).list_namespaced_pod(
            self.namespace, label_selector=f"{JOBSET_LABEL}={self.name}", _request_timeout=REQUEST_TIMEOUT_S)
        pods = api.sanitize_for_serialization(listed).get("items") or []
        pod = waiting_pod(pods)
        return gang_admission(job, pods, await self._pod_events(api, pod) if pod else [], waited_s)

    def done(self, seen) -> bool:
        return bool(seen.phase) if self.phase == "end" else seen.released


def _said(e: BaseException) -> str:
    """An API error in one short line (its status and reason, not its body)."""
    if isinstance(e, ApiException):
        return f"{e.status} {e.reason}"
    return f"{type(e).__name__}: {e}"[:200]
