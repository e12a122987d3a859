"""The names and times of "preemption that loses no work" (docs/kubernetes.md): one home for
the controller, which asks a victim to save, and the trainer, which answers.

The controller writes `CHECKPOINT_REQUESTED` on the victim's pod; the trainer reads it from a
downward-API file of its pod's annotations (`POD_INFO_ENV`, default `DEFAULT_POD_INFO`), saves,
and writes `LAST_CHECKPOINT` (at or after the request) and `CHECKPOINT_SAVE_S` on its pod. A
pod declares that its trainer answers with `SAVES_ON_REQUEST` ("true") and its periodic
interval with `CHECKPOINT_EVERY_S`. Kept here, below both, so that neither imports the other.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

#: on a pod whose trainer saves when asked ("true")
SAVES_ON_REQUEST = "gpu-policy.io/saves-on-request"
#: on a victim, written by the controller: when it asked for a checkpoint (RFC 3339 UTC)
CHECKPOINT_REQUESTED = "gpu-policy.io/checkpoint-requested"
#: written by the trainer after each save: when (RFC 3339 UTC; an answer is at or after the request)
LAST_CHECKPOINT = "gpu-policy.io/last-checkpoint"
#: written by the trainer after each save: the seconds it took
CHECKPOINT_SAVE_S = "gpu-policy.io/checkpoint-save-s"
#: on a pod whose periodic checkpoint interval is known: seconds between saves
CHECKPOINT_EVERY_S = "gpu-policy.io/checkpoint-every-s"

#: where the pod's annotations are mounted (a downwardAPI volume, item `annotations`)
POD_INFO_DIR = "/etc/gpu-policy/pod"
DEFAULT_POD_INFO = f"{POD_INFO_DIR}/annotations"
#: the environment variable that names that file
POD_INFO_ENV = "GPU_POLICY_POD_INFO"
#: the environment variable that holds the pod's terminationGracePeriodSeconds
GRACE_ENV = "GPU_POLICY_TERMINATION_GRACE_S"

#: Kubernetes' default terminationGracePeriodSeconds (whole seconds): what a pod gets unless it says otherwise
POD_GRACE_S = 30
#: the contract's default `checkpoint_deadline_s`: the longest the leader waits for a trainer's
#: answer, and the longest grace period it gives for a save
CHECKPOINT_DEADLINE_S = 600.0
#: seconds the contract allows beyond a save: in an eviction's grace period, and after an awaited checkpoint
SAVE_MARGIN_S = 30.0
#: the shortest wait for a trainer's answer to a request
LEAST_ANSWER_WAIT_S = 60.0


def answer_deadline_s(save_s: float | None, deadline_s: float = CHECKPOINT_DEADLINE_S) -> float:
    """Seconds after asking a victim to checkpoint that the leader evicts it without an answer:
    twice its save time (None: not known), at least 60 s, capped by `deadline_s` (the contract's)."""
    return min(deadline_s, max(LEAST_ANSWER_WAIT_S, 2 * (save_s or 0.0)))


def eviction_grace_s(save_s: float | None, pod_grace_s: float = POD_GRACE_S,
                     deadline_s: float = CHECKPOINT_DEADLINE_S) -> float:
    """The grace period the leader gives an evicted victim: the larger of its pod's own and the
    time to save on SIGTERM (`save_s` + 30 s, that one capped by `deadline_s`); the pod's own
    when its save time is not known (the contract's: a pod's own longer one is kept)."""
    return pod_grace_s if save_s is None else max(pod_grace_s, min(save_s + SAVE_MARGIN_S, deadline_s))


def checkpoint_wait_s(evict_after_s: float, save_s: float | None) -> float:
    """Seconds after the plan that the leader evicts a victim it stops at its periodic
    checkpoint (`evict_after_s`) if its `last-checkpoint` has not moved by then: the checkpoint,
    its save (None: not known) and 30 s more (the contract's)."""
    return evict_after_s + (save_s or 0.0) + SAVE_MARGIN_S


def rfc3339(moment: datetime) -> str:
    """`moment` in UTC as RFC 3339 in whole seconds (the contract compares whole seconds)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


#: RFC 3339's date-time: extended form, seconds required, an offset (``Z`` or ``+hh:mm``)
_RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})")


def parse_rfc3339(text: str, utc: bool = False) -> datetime:
    """An RFC 3339 time with its offset (``Z`` or ``+hh:mm``; with `utc`, a zero offset only),
    as an aware datetime; ValueError for anything else (Python's own ISO 8601 reader also takes
    forms RFC 3339 does not: no seconds, the basic form, no offset)."""
    if not _RFC3339.fullmatch(text):
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-31T12:00:00Z, got {text[:40]!r}")
    whole, _, fraction = text.upper().replace("Z", "+00:00").partition(".")
    if fraction:  # Python reads 1-6 digits of a second: cut to microseconds, and pad
        digits = fraction[:-6]
        whole = f"{whole}.{digits[:6].ljust(6, '0')}{fraction[-6:]}"
    moment = datetime.fromisoformat(whole)
    if utc and moment.utcoffset():
        raise ValueError(f"must be an RFC 3339 time in UTC such as 2026-01-31T12:00:00Z, got {text[:40]!r}")
    return moment

