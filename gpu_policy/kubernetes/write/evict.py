"""Preempt and move: annotate each victim pod with the plan's reason, then evict it.

A mark is removed when the plan that wrote it is not carried out: from a pod whose
eviction stays refused, and (`unmark`) from a pod a later plan keeps, e.g. after a planner
was killed between the annotation and the eviction.

Evictions go through the Eviction API (policy/v1), so PodDisruptionBudgets are honoured,
with the grace period the caller gives each pod (gpu_policy.kubernetes.write.checkpoint_first:
long enough for its save), so the training step's SIGTERM handler can save a checkpoint
before the pod stops. A 429 (a PodDisruptionBudget, or rate limiting) is
retried after Retry-After, or with doubling backoff when the answer has none, within
`eviction_deadline_s`; what is still refused then is reported as blocked, never forced.
Every pod of a gang is evicted, or the outcome says which are still running.
"""

from __future__ import annotations

import time
from typing import Callable

from gpu_policy.model.cluster import Outcome
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.names import PREEMPTED_ANNOTATION
from gpu_policy.kubernetes.read.pods import PodRef

def evict_job(client: KubeClient, job: str, action: str, reason: str, pods: list[PodRef], check: Callable[[], None],
              read_pod: Callable[[str, str], dict | None], sleep: Callable[[float], None] = time.sleep,
              monotonic: Callable[[], float] = time.monotonic, grace: dict[str, int] | None = None) -> Outcome:
    """Annotate every pod of the job, then evict each, with `grace[uid]` seconds to stop (a pod
    not in it: its own grace period); `check` runs before every write (it raises when the
    planning lease was lost). Each pod is read again first (`read_pod`: a GET in a one-shot
    command; the controller reads its cache, so an eviction costs its annotation and its
    eviction only)."""
    names = [str(p) for p in pods]
    live, gone = [], []
    for ref in pods:
        check()
        pod = read_pod(ref.namespace, ref.name)
        if not ref.names(pod):
            gone.append(str(ref))  # finished, or replaced by a new pod since we looked
        elif (pod.get("metadata") or {}).get("deletionTimestamp"):
            gone.append(str(ref))  # already on its way out
        elif _annotated(client, ref, reason):
            live.append(ref)
        else:
            gone.append(str(ref))
    blocked, evicted = [], []
    for ref in live:
        check()
        answer = _evict(client, ref, (grace or {}).get(ref.uid), check, sleep, monotonic)
        if answer == 429:
            check()
            client.patch_pod_metadata(ref.namespace, ref.name, {PREEMPTED_ANNOTATION: None})
            blocked.append(str(ref))
        elif answer == 201:
            evicted.append(ref)
    if blocked:
        return Outcome(job, action, "blocked", f"a PodDisruptionBudget refused the eviction for "
                                               f"{client.settings.eviction_deadline_s:g} s; still running: "
                                               f"{', '.join(blocked)}", names)
    if not evicted:
        return Outcome(job, action, "gone", "its pods had already stopped", names)
    return Outcome(job, action, "done", f"evicted {len(evicted)} pod{'s' if len(evicted) > 1 else ''}: {reason}",
                   names)


def _annotated(client: KubeClient, ref: PodRef, reason: str) -> bool:
    """Mark the pod preempted; False when it is gone, or when the pod of that name is another one
    than was read (made since under the same name: the mark is taken off it again)."""
    answer = client.patch_pod_metadata(ref.namespace, ref.name, {PREEMPTED_ANNOTATION: reason})
    if answer is not None and not ref.names(answer):
        client.patch_pod_metadata(ref.namespace, ref.name, {PREEMPTED_ANNOTATION: None})
    return ref.names(answer)


def unmark(client: KubeClient, job: str, pods: list[PodRef], check: Callable[[], None], execute: bool) -> Outcome:
    """Remove the preempted mark from pods that the plan keeps (the plan that marked them
    was not carried out)."""
    names = [str(p) for p in pods]
    if not execute:
        return Outcome(job, "unmark", "dry run", f"would remove {PREEMPTED_ANNOTATION}: the plan keeps it", names)
    for ref in pods:
        check()
        client.patch_pod_metadata(ref.namespace, ref.name, {PREEMPTED_ANNOTATION: None})
    return Outcome(job, "unmark", "done", f"removed {PREEMPTED_ANNOTATION}: the plan that wrote it was not carried "
                                          "out", names)


def _evict(client: KubeClient, ref: PodRef, grace_s: int | None, check: Callable[[], None],
           sleep: Callable[[float], None], monotonic: Callable[[], float]) -> int:
    """Evict one pod, the one read (its uid a precondition): 201 evicted, 404 gone, 409 another pod
    of that name now, 429 a disruption budget still refusing at the deadline. Each attempt after
    the first passes `check` too: the lease may be lost while a budget refuses."""
    backoff = client.backoff(client.settings.eviction_deadline_s, sleep, monotonic)
    while True:
        answer = client.evict_pod(ref.namespace, ref.name, grace_s, ref.uid)
        if answer.status != 429 or not backoff.pause(answer.retry_after):
            return answer.status
        check()
