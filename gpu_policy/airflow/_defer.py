"""What the deferrable operators share: their deadlines, the connection they hand the trigger,
and the words of a trigger's event that is not the one they waited for.

Airflow enforces ``execution_timeout`` only while the task runs in a worker, not while it is
deferred, so (as KubernetesPodOperator does) the task's deadline, ``ti.start_date`` (kept across
resumes) plus ``execution_timeout``, goes to the trigger, which ends its wait there; the
deferral's own timeout is a backstop a little later, so that the trigger's event comes first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

from airflow.exceptions import AirflowException, AirflowNotFoundException
from airflow.sdk import BaseHook


@dataclass(frozen=True)
class Deadlines:
    """Seconds since the epoch: when the step's own wait ends, when the task's
    execution_timeout does (None: no timeout); and the deferral's backstop."""

    wait_until: float
    execution_deadline: float | None
    defer_timeout: timedelta


def deadlines(op, context, wait_s: float, poll_s: float) -> Deadlines:
    now = time.time()
    execution = None
    if op.execution_timeout is not None:
        execution = context["ti"].start_date.timestamp() + op.execution_timeout.total_seconds()
    ends = min(now + wait_s, execution if execution is not None else float("inf"))
    return Deadlines(now + wait_s, execution, timedelta(seconds=max(ends - now, 0) + max(60.0, 2 * poll_s)))


def connection_extras(conn_id: str | None) -> dict | None:
    """The connection's extras, resolved in the worker so the triggerer needs no access to it
    (None: no such connection here; the triggerer resolves it then)."""
    if not conn_id:
        return None
    try:
        return BaseHook.get_connection(conn_id).extra_dejson
    except AirflowNotFoundException:
        return None


def last_seen(cls, event: dict, **where):
    """What the trigger's last look saw, as `cls` (Admission, GangAdmission, Finish), `where`
    naming the object when no look succeeded."""
    return cls(**{**where, **{k: event[k] for k in cls.__dataclass_fields__ if k in event}})


def not_done(op, event: dict, line: str = "", missed: str = "") -> AirflowException:
    """The failure for a trigger's event that is not ``done``: what it waited for was `missed`
    (``not_in_time``; `line`: where it stood), the task's execution_timeout passed while it was
    deferred (``timeout``), or an ``error``."""
    status = event.get("status")
    if status == "not_in_time":
        return AirflowException(f"{line}: {missed}")
    if status == "timeout":
        return AirflowException(f"{line}: execution_timeout ({op.execution_timeout}) passed while deferred")
    return AirflowException(f"{event.get('namespace')}/{event.get('name')}: {event.get('message') or status}")
