"""Attach and detach GPUs through ComposabilityRequests, and wait for them (docs/composition.md).

One request of gpu-policy's per (node, GPU model), named by `request_name`; `size` is what it
attaches. More or fewer GPUs change `size` by a merge patch (the operator's webhook refuses a
second request for the same node and model); size 0 deletes the request (the operator detaches
its devices, Cleaning, then lets it go, Deleting). Every write stamps the request with when its
size changed and what it was, so any later planner can tell when it is overdue and roll it
back: its errors are reported verbatim. Requests that are not gpu-policy's are never written.
Each write's answer goes to `seen` (the controller's cache takes it in at once, so its next
round does not ask again before the watch brings the request).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from gpu_policy.model.cluster import AttachProgress, Outcome
from gpu_policy.model.composition import describe
from gpu_policy.kubernetes.transport.answers import Answer
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.read.composable import ComposedNodes, overdue, planned_size
from gpu_policy.kubernetes.names import (CRO_GROUP, CRO_KIND, CRO_VERSION, MANAGED_BY, MANAGED_BY_LABEL,
                                         PREVIOUS_SIZE_ANNOTATION, REQUESTED_AT_ANNOTATION)
from gpu_policy.kubernetes.read.requests import RequestView, read_request, request_name
from gpu_policy.model.plan import Composition


def _stamp(now: float, previous: int) -> dict:
    moment = datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {REQUESTED_AT_ANNOTATION: moment, PREVIOUS_SIZE_ANNOTATION: str(previous)}


def new_request(node: str, model: str, size: int, now: float) -> dict:
    """The ComposabilityRequest that attaches `size` GPUs of `model` to `node`."""
    return {"apiVersion": f"{CRO_GROUP}/{CRO_VERSION}", "kind": CRO_KIND,
            "metadata": {"name": request_name(node, model), "labels": {MANAGED_BY_LABEL: MANAGED_BY},
                         "annotations": _stamp(now, 0)},
            "spec": {"resource": {"type": "gpu", "model": model, "size": size, "target_node": node,
                                  "allocation_policy": "samenode"}}}


def _ignore(name: str, body: dict) -> None:
    pass


def roll_back(client: KubeClient, r: RequestView, now: float, check: Callable[[], None],
              seen: Callable[[str, dict], None] = _ignore) -> Outcome:
    """A request of gpu-policy's that missed its deadline goes back to its size before; the
    outcome quotes its errors verbatim."""
    deadline_s = client.settings.composition_deadline_s
    why = r.errors() or f"no error given, state {r.stage()}"
    text = (f"ComposabilityRequest {r.name}: not complete {deadline_s:g} s after its size became {r.size}: "
            f"{why}; size rolled back to {r.previous_size}")
    answer = _resize(client, r, r.previous_size, r.previous_size, now, check)
    if answer.status >= 300 and answer.status != 404:
        text += f", which failed: {answer.message}"
    else:
        seen(r.name, answer.body)
    return Outcome(r.node, "attach" if r.size > r.previous_size else "detach", "failed", text, [r.name])


def _resize(client: KubeClient, r: RequestView, size: int, previous: int, now: float,
            check: Callable[[], None]) -> Answer:
    """Patch `size` (and the stamp), or delete the request at size 0."""
    check()
    if size == 0:
        return client.delete_composability_request(r.name)
    patch = {"metadata": {"annotations": _stamp(now, previous)}, "spec": {"resource": {"size": size}}}
    return client.patch_composability_request(r.name, patch, client.settings.composition_deadline_s)


class RequestWriter:
    """Writes the ComposabilityRequests of one execution's compositions, against what one look
    found (`composed`); every write runs `check` first (it raises when the planning lease was
    lost). Not the planner's Composer, which decides the compositions this one writes."""

    def __init__(self, client: KubeClient, composed: ComposedNodes, now: float, check: Callable[[], None],
                 seen: Callable[[str, dict], None] = _ignore):
        self.client, self.composed, self.now, self.check, self.seen = client, composed, now, check, seen
        self.deadline_s = client.settings.composition_deadline_s
        self.rolled_back: set[str] = set()  # requests this execution rolled back: not written again in it

    def roll_back_overdue(self) -> list[Outcome]:
        """gpu-policy's requests that missed their deadline go back to their size before."""
        late = [r for r in self.composed.requests.values() if overdue(r, self.now, self.deadline_s)
                and r.previous_size != r.size]
        self.rolled_back = {r.name for r in late}
        return [roll_back(self.client, r, self.now, self.check, self.seen) for r in late]

    def carry_out(self, c: Composition, execute: bool) -> Outcome:
        action = "attach" if c.change > 0 else "detach"
        r = self.composed.requests.get((c.node, c.model))
        old = planned_size(r, self.now, self.deadline_s) if r else 0
        new = old + c.change
        if new < 0:
            raise ValueError(f"the plan detaches {-c.change} {c.model} from {c.node}, where gpu-policy attached {old}")
        name = r.name if r else request_name(c.node, c.model)
        detail = f"ComposabilityRequest {name}, size {old} -> {new}: {describe(c)}" + (f": {c.reason}" if c.reason else "")
        if not execute:
            return Outcome(c.node, action, "dry run", detail, [name])
        if r is not None and r.deleting:
            return Outcome(c.node, action, "failed", f"{detail}: the request is being deleted; once it is gone, "
                                                     "the next plan asks again", [name])
        if name in self.rolled_back:  # (deleted, when it was new: a patch would not bring it back)
            return Outcome(c.node, action, "failed", f"{detail}: it was rolled back just now (above); the next "
                                                     "plan asks again", [name])
        answer = self._create(c.node, c.model, new) if r is None else _resize(self.client, r, new, old, self.now,
                                                                              self.check)
        if answer.status < 300:
            self.seen(name, answer.body)
            return Outcome(c.node, action, "requested", detail, [name])
        return Outcome(c.node, action, "failed", f"{detail}: {_refusal(answer, name)}", [name])

    def _create(self, node: str, model: str, size: int) -> Answer:
        self.check()
        body = new_request(node, model, size, self.now)
        answer = self.client.create_composability_request(body, self.deadline_s)
        if answer.status == 409:  # the name is taken: by a request of ours made meanwhile, or by another (node, model)
            existing = read_request(self.client.read_composability_request(body["metadata"]["name"]) or {})
            if existing and existing.ours and (existing.node, existing.model) == (node, model):
                return _resize(self.client, existing, existing.size + size, existing.size, self.now, self.check)
        return answer


def _refusal(answer: Answer, name: str) -> str:
    if answer.status == 404:
        return "no ComposabilityRequest resource: is the CDI operator (composable-resource-operator) installed?"
    if answer.status == 409:
        return f"the name {name} is taken by a request for another node or model"
    return answer.message or f"the API server answered {answer.status}"


class RequestWaiter:
    """The requests a starting step waits for, read again at each `poll`. When they fail (a
    write was refused, a request is gone, or one missed its deadline) `give_up` rolls the
    late ones back and gives the step's reservation back; the failure is final."""

    def __init__(self, client: KubeClient, names: list[str], clock: Callable[[], float],
                 give_up: Callable[[list[RequestView]], list[str]], failed: str | None = None):
        self.client, self.names, self.clock, self.give_up = client, names, clock, give_up
        self.failed = failed
        self._final: AttachProgress | None = None

    def poll(self) -> AttachProgress:
        if self._final is not None:
            return self._final
        if self.failed:
            return self._stop(self.failed, [])
        views = []
        for name in self.names:
            obj = self.client.read_composability_request(name)
            view = read_request(obj) if obj else None
            if view is None or view.deleting:
                return self._stop(f"ComposabilityRequest {name} {'is being deleted' if view else 'is gone'}", [])
            views.append(view)
        late = [v for v in views if overdue(v, self.clock(), self.client.settings.composition_deadline_s)]
        if late:
            return self._stop("", late)
        waiting = [v.waiting() for v in views if not v.complete]
        return AttachProgress(done=not waiting, failed=False, text="; ".join(waiting))

    def _stop(self, text: str, late: list[RequestView]) -> AttachProgress:
        texts = self.give_up(late)
        self._final = AttachProgress(done=False, failed=True, text="; ".join(filter(None, [text, *texts])))
        return self._final
