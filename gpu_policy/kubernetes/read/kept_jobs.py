"""The jobs of a look, kept for the next look of the same memo (gpu_policy.kubernetes.read.memo):
the GPU pods by job as they come and go (`Groups`), each job made of them remade only when its
pods changed, and the scenario's jobs in their order with what follows from them (`Jobs`): the
nodes each runs on, the labels they select, their ages as of the look.

These only keep; what a pod, a job and a node become is gpu_policy.kubernetes.read.pod_jobs' and
gpu_policy.kubernetes.read.snapshot's.
"""

from __future__ import annotations

import bisect
from collections import Counter
from operator import itemgetter
from typing import Any, Callable, NamedTuple

from gpu_policy.kubernetes.read.constraints import selected_labels
from gpu_policy.kubernetes.read.kept import Key, Made, Watcher
from gpu_policy.kubernetes.read.pod_view import PodRef, PodView
from gpu_policy.kubernetes.read.progress import Aging, Moments
from gpu_policy.model import Job

#: what becomes of a GPU pod (`Sorted.kind`); None: a pod that asks for no GPU
MANAGED, UNMANAGED, TERMINATING, LEFT_OUT = "managed", "unmanaged", "terminating", "left out"


class Sorted(NamedTuple):
    """A pod as a look counts it: its view, what becomes of it, and why a pod gpu-policy may not
    touch is so (None: it cannot be read)."""

    view: PodView
    kind: str | None
    why: str | None = None


class GroupMade(NamedTuple):
    """What one job's pods become (gpu_policy.kubernetes.read.snapshot.Snapshot has each field's
    meaning): the job to plan, or what holds it back."""

    name: str
    job: Job | None = None
    refs: list[PodRef] | None = None
    moments: Moments | None = None
    gated: list[PodRef] | None = None
    held: list[str] | None = None
    broken: list[PodRef] | None = None
    incomplete: str | None = None
    lines: tuple[str, ...] = ()
    unmanaged: tuple[PodView, ...] = ()  # its pods, when they cannot be one job
    terminating: tuple[PodView, ...] = ()  # a broken gang's pods that hold GPUs

    @property
    def plain(self) -> bool:
        """A job to plan, and nothing else to say or do."""
        return self.job is not None and not (self.gated or self.lines)


class Groups(Watcher):
    """The look's GPU pods by job ((namespace, group) -> pod key -> view), as the stage that sorts
    them tells (`changed`); pods gpu-policy may not touch, and pods that ask for no GPU by node;
    each job made of its pods (`remake`), again only for jobs whose pods changed."""

    def __init__(self):
        self.members: dict[tuple[str, str], dict[Key, PodView]] = {}
        self.unmanaged: dict[Key, Sorted] = {}
        self.terminating: dict[Key, PodView] = {}
        self.others: dict[str, dict[Key, PodView]] = {}  # node -> its pods that ask for no GPU
        self.made: dict[tuple[str, str], GroupMade] = {}
        self.inputs: dict[tuple[str, str], tuple] = {}  # what each was made from: its pods, and if it is reserved
        self.refs: dict[str, list[PodRef]] = {}  # each job to plan -> its pods
        self.special: set[tuple[str, str]] = set()  # the keys of `made` that are not `plain`
        self.dirty: set[tuple[str, str]] = set()  # groups whose pods changed since the last `remake`
        self.moved: set[str] = set()  # nodes whose pods that ask for no GPU changed
        self._reserved: set[str] = set()
        self._context: Any = None

    def changed(self, key: Key, before: Made | None, after: Made | None) -> None:
        for made, adding in ((before, False), (after, True)):
            if made is None:
                continue
            s: Sorted = made.passed
            view = s.view
            if s.kind == MANAGED:
                group = (view.namespace, view.group)
                self.dirty.add(group)
                _put(self.members, group, key, view if adding else None)
            elif s.kind == UNMANAGED:
                _set(self.unmanaged, key, s if adding else None)
            elif s.kind == TERMINATING:
                _set(self.terminating, key, view if adding else None)
            elif s.kind is None and view.node:
                self.moved.add(view.node)
                _put(self.others, view.node, key, view if adding else None)

    def remake(self, reserved: set[str], context: Any,
               make: Callable[[str, tuple[PodView, ...], bool], GroupMade]) -> list[tuple[GroupMade | None,
                                                                                        GroupMade | None]]:
        """Each job whose pods, or whether a reservation stands for it (`reserved`: job names),
        changed (every job, when `context` did) made again with `make(name, pods, reserved)`;
        (before, after) of each that changed."""
        dirty, self.dirty = self.dirty, set()
        fresh = context != self._context
        if fresh:
            self._context = context
            dirty = set(self.members) | set(self.made)
        dirty.update(tuple(name.split("/", 1)) for name in reserved ^ self._reserved)
        self._reserved = set(reserved)
        out = []
        for group in sorted(dirty):  # in order: the jobs of a first look lie in memory as a plan reads them
            before, members = self.made.get(group), self.members.get(group)
            name = f"{group[0]}/{group[1]}"
            if not members:
                if before is not None:
                    self._set(group, name, None, None)
                    out.append((before, None))
                continue
            inputs = (tuple(members[k] for k in sorted(members)) if len(members) > 1 else tuple(members.values()),
                      name in reserved)
            if before is not None and not fresh and self.inputs[group] == inputs:
                continue  # the same pods, or equal ones
            after = make(name, *inputs)
            self._set(group, name, after, inputs)
            out.append((before, after))
        return out

    def _set(self, group: tuple[str, str], name: str, made: GroupMade | None, inputs: tuple | None) -> None:
        if made is None:
            del self.made[group], self.inputs[group]
        else:
            self.made[group], self.inputs[group] = made, inputs
        if made is not None and made.job is not None:
            self.refs[name] = made.refs
        else:
            self.refs.pop(name, None)
        (self.special.add if made is not None and not made.plain else self.special.discard)(group)

    def special_ones(self) -> list[GroupMade]:
        """The jobs made that are not `plain`, in the order of their names."""
        return [self.made[g] for g in sorted(self.special)]


def _set(index: dict, key: Key, value: Any) -> None:
    """index[key] = value (None: removed)."""
    if value is not None:
        index[key] = value
    else:
        index.pop(key, None)


def _put(index: dict, where: Any, key: Key, value: Any) -> None:
    """index[where][key] = value (None: removed, and `where` with it once empty)."""
    if value is not None:
        index.setdefault(where, {})[key] = value
        return
    inner = index.get(where, {})
    inner.pop(key, None)
    if not inner:
        index.pop(where, None)


class SortedKeys:
    """Keys in sorted order as they come and go: one at a time by bisection, many at once (a
    first look) by sorting once, when they are next asked for."""

    def __init__(self):
        self._keys: list = []
        self._added: set = set()
        self._gone: set = set()

    def add(self, key) -> None:
        self._gone.discard(key)
        self._added.add(key)

    def discard(self, key) -> None:
        self._added.discard(key)
        self._gone.add(key)

    def keys(self) -> list:
        keys = self._keys
        if len(self._added) + len(self._gone) > 64:
            self._keys = sorted((set(keys) - self._gone) | self._added)
        else:
            for key in self._gone:
                i = bisect.bisect_left(keys, key)
                if i < len(keys) and keys[i] == key:
                    del keys[i]
            for key in self._added:
                i = bisect.bisect_left(keys, key)
                if i == len(keys) or keys[i] != key:
                    keys.insert(i, key)
        self._added, self._gone = set(), set()
        return self._keys


class Jobs:
    """The scenario's jobs by name, as built and as this look has them (their ages as of now),
    in the scenario's order (oldest first: (submitted_at, name)); which run on each node; the
    label keys they select, and their namespaces; the jobs built and the nodes whose running jobs
    changed since the last `checked`."""

    def __init__(self):
        self.built: dict[str, Job] = {}
        self.now: dict[str, Job] = {}
        self.order = SortedKeys()  # (submitted_at, name) of each job
        self.place: dict[str, tuple] = {}  # each job's (submitted_at, name)
        self.on: dict[str, dict[str, str]] = {}  # node -> names of the jobs running there
        self.labels: Counter = Counter()
        self.namespaces: Counter = Counter()
        self.fresh: list[Job] = []
        self.moved: set[str] = set()
        self.aging = Aging()

    def put(self, name: str, job: Job | None, moments: Moments | None = None) -> None:
        """`job` (None: gone) stands for `name` now; with `moments`, its ages are counted from them."""
        old = self.built.pop(name, None)
        if old is job:
            if job is not None:
                self.built[name] = job
            return
        self.aging.put(name, job, moments)
        for j, step in ((old, -1), (job, 1)):
            if j is None:
                continue
            place = (j.submitted_at, name)
            if step > 0:
                self.order.add(place)
                self.place[name] = place
            else:
                self.order.discard(place)
                del self.place[name]
            if j.node_selector or j.node_affinity:
                _count(self.labels, selected_labels(j), step)
            if "/" in name:
                _count(self.namespaces, (name.partition("/")[0],), step)
            for node in j.running:
                self.moved.add(node)
                _put(self.on, node, name, name if step > 0 else None)
        if job is None:
            del self.now[name]
        else:
            self.built[name] = self.now[name] = job
            self.fresh.append(job)

    def age(self, now: float) -> dict[str, tuple[int, int]]:
        """Each job's ages as of `now` (copies of those whose ages changed); field -> the least
        and most value set anew, for their checks."""
        copies, bounds = self.aging.at(now)
        self.now.update(copies)
        return bounds

    def listed(self) -> list[Job]:
        """The jobs as this look has them, in the scenario's order."""
        return list(map(self.now.__getitem__, map(itemgetter(1), self.order.keys())))

    def running_on(self, node: str) -> list[str]:
        """The names of the jobs running on `node`, in the scenario's order."""
        return sorted(self.on.get(node, ()), key=self.place.__getitem__)

    def checked(self) -> None:
        """This look's jobs passed the scenario's checks."""
        self.fresh, self.moved = [], set()


def _count(counter: Counter, keys, step: int) -> None:
    for key in keys:
        counter[key] += step
        if not counter[key]:
            del counter[key]
