"""What a job's pods say about its run and its checkpoints: the scenario's `running_for_s`,
`waiting_for_s`, `checkpoint_age_s`, `checkpoint_every_s`, `save_s` and `saves_on_request`
(docs/kubernetes.md, "Pods -> jobs"), which the planner's rules of lost work, waiting for a
checkpoint, minimum runtime and preemption delay read.

A gang is judged by its least favourable replica: it started when its last replica did, its
checkpoint is as old as its oldest replica's, it saves in its slowest replica's time, and it
saves on request only when every replica's trainer does (each answers on its own pod).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gpu_policy.kubernetes.read.pod_view import PodView


def progress(pods: list[PodView], moments: Moments, now: float, running: bool) -> dict:
    """The job's fields of time and checkpoints from its pods (`moments`: Moments.of them), seen
    at `now` (seconds since the epoch); a field no pod says anything about is None (unknown)."""
    every = [p.checkpoint_every_s for p in pods if p.checkpoint_every_s is not None]
    save = [p.save_s for p in pods if p.save_s is not None]
    return {
        **ages(moments, now, running),
        "checkpoint_every_s": min(every, default=None),
        "save_s": max(save, default=None),
        "saves_on_request": all(p.saves_on_request for p in pods),
    }


class Moments(NamedTuple):
    """When a gang started (its last replica), was created (its first) and last checkpointed (its
    oldest replica's checkpoint): what its fields of time are counted from (None: no pod says)."""

    started: float | None
    created: float
    saved: float | None

    @classmethod
    def of(cls, pods: list[PodView]) -> Moments:
        started = [p.started for p in pods if p.started is not None]
        saved = [p.checkpoint_at for p in pods if p.checkpoint_at is not None]
        return cls(max(started, default=None), min(p.created for p in pods), min(saved, default=None))


def ages(moments: Moments, now: float, running: bool) -> dict:
    """The job fields that change with the time alone, at `now` (a look that keeps a job sets
    them anew)."""
    return {
        "running_for_s": _age(now, moments.started) if running and moments.started is not None else None,
        "waiting_for_s": None if running else _age(now, moments.created),
        "checkpoint_age_s": None if moments.saved is None else _age(now, moments.saved),
    }


def _age(now: float, since: float) -> int:
    """Whole seconds from `since` to `now`; 0 when a clock is behind."""
    return max(0, round(now - since))


class Aging:
    """The fields of time (`ages`) of many jobs, counted anew at each look in one numpy step over
    all of them: a look that keeps its jobs copies only those whose ages changed (whole seconds,
    so at most once a second each) instead of asking `ages` of each of 21,000 jobs. The same
    rule as `ages`: rint is round's half to even, and a field with nothing to count from is None."""

    _FIELDS = ("running_for_s", "waiting_for_s", "checkpoint_age_s")

    def __init__(self):
        self._slot: dict[str, int] = {}
        self._free: list[int] = []
        self._jobs: list = []  # slot -> the job as built (None: a free slot)
        self._since = np.empty((3, 0))  # started, created, saved: per slot, NaN where unknown
        self._running = np.empty(0, dtype=bool)
        self._ages = np.empty((3, 0))  # the slot's job's fields as the last look gave them, NaN for None
        self._put: dict[int, tuple] = {}  # slot -> what `at` sets in the arrays: puts go in at once

    def put(self, name: str, job, moments: Moments | None) -> None:
        """`job` (None: gone) is counted from `moments` from now on; its fields are its ages now."""
        if name in self._slot:  # a free slot counts nothing
            slot = self._slot.pop(name)
            self._jobs[slot], self._put[slot] = None, _FREE
            self._free.append(slot)
        if job is None or moments is None:
            return
        if not self._free:
            self._grow()
        slot = self._slot[name] = self._free.pop()
        self._jobs[slot] = job
        self._put[slot] = (moments.started, moments.created, moments.saved, bool(job.running), job.running_for_s,
                           job.waiting_for_s, job.checkpoint_age_s)  # None: NaN in the arrays

    def at(self, now: float) -> tuple[dict, dict[str, tuple[int, int]]]:
        """name -> a copy of each job whose ages at `now` differ from what it had, with them; and
        field -> (least, most) of the values set, for their checks."""
        if self._put:
            slots = np.fromiter(self._put, dtype=np.intp)
            values = np.array(list(self._put.values()), dtype=float).T  # None -> NaN
            self._since[:, slots], self._running[slots], self._ages[:, slots] = values[:3], values[3] > 0, values[4:]
            self._put.clear()
        with np.errstate(invalid="ignore"):
            age = np.maximum(0.0, np.rint(now - self._since))
        started, saved = ~np.isnan(self._since[0]), ~np.isnan(self._since[2])
        ages = np.stack([np.where(self._running & started, age[0], np.nan),
                         np.where(self._running, np.nan, age[1]),
                         np.where(saved, age[2], np.nan)])
        same = (ages == self._ages) | (np.isnan(ages) & np.isnan(self._ages))
        slots = np.flatnonzero(~same.all(axis=0))
        if not len(slots):
            return {}, {}
        changed = ages[:, slots]
        self._ages[:, slots] = changed
        unknown = np.isnan(changed)
        columns = np.nan_to_num(changed).astype(np.int64).astype(object)  # Python ints, as round() gives
        columns[unknown] = None
        copies, new = {}, object.__new__
        for slot, running, waiting, checkpoint in zip(slots.tolist(), *columns.tolist()):
            job = self._jobs[slot]
            fields = job.__dict__.copy()  # a dataclass's copy, without its __init__: many a look
            fields["running_for_s"], fields["waiting_for_s"], fields["checkpoint_age_s"] = running, waiting, checkpoint
            made = new(type(job))
            made.__dict__ = fields
            copies[job.name] = made
        bounds = {f: (int(np.nanmin(row)), int(np.nanmax(row)))
                  for f, row, none in zip(self._FIELDS, changed, unknown) if not none.all()}
        return copies, bounds

    def _grow(self) -> None:
        size = max(64, 2 * len(self._jobs))
        more = size - len(self._jobs)
        self._free.extend(range(size - 1, len(self._jobs) - 1, -1))
        self._jobs.extend([None] * more)
        self._since = np.hstack([self._since, np.full((3, more), np.nan)])
        self._running = np.concatenate([self._running, np.zeros(more, dtype=bool)])
        self._ages = np.hstack([self._ages, np.full((3, more), np.nan)])


_FREE = (np.nan, np.nan, np.nan, False, np.nan, np.nan, np.nan)

