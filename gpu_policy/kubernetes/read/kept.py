"""What a look makes of each pod or node, kept for the next look of the same memo
(gpu_policy.kubernetes.read.memo): made again only for what changed.

A look is a chain of steps (`Stage`), each made of one object at a time: a pod's DRA claims, its
size against the largest node, its TrainJob and topology, its physical GPUs, its job and queue.
A stage is told which objects changed since its last look (`Diff`: by identity, so a view read
again is a change until a stage finds it equal), makes those again, and tells the next stage which
of its results changed: a result equal to the last one is the last one, so nothing after it is
made again. When what a stage reads beside the object (its context: the largest node, the
topology levels, the queues) changes, it makes every object again. What the look needs of all
the results of a stage (does any pod ask for a topology; which TrainJobs have started; which
pods are marked) is counted as results come and go (`Counts`), never by a pass over every pod.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Hashable, NamedTuple

#: an object's key: (namespace, name) for a pod, its name for a node
Key = Hashable


class Diff:
    """Which objects of a list changed since the list it was given last: each object that was not
    in it (by identity), and the key of each that is gone, in one pass of the list in C."""

    def __init__(self, key: Callable[[Any], Key]):
        self.key = key
        self._ids: dict[int, Any] = {}  # holds every object of the last list, so no id is reused meanwhile

    def __call__(self, objects: list) -> dict[Key, Any]:
        """key -> the object now, or None for one gone (an object read again: gone and back, the new one)."""
        ids = dict(zip(map(id, objects), objects))
        last, key = self._ids, self.key
        changes = {key(last[i]): None for i in last.keys() - ids.keys()} if last else {}
        changes.update((key(ids[i]), ids[i]) for i in (ids.keys() - last.keys() if last else ids))
        self._ids = ids
        return changes


class Watcher:
    """Told of every result of a stage that changed (before: None for a new object; after: None for
    one gone)."""

    def changed(self, key: Key, before: Any, after: Any) -> None: ...


class Counts(Watcher):
    """How many of the objects a stage passes on have each value of what `of(key, object)` says
    of them, one value per name (None: not counted): what a look needs of all the pods, kept as
    they come and go. counts[name]: value -> how many."""

    def __init__(self, of: Callable[[Key, Any], tuple], *names: str):
        self.of = of
        self._counts: dict[str, Counter] = {name: Counter() for name in names}
        self._each = list(self._counts.values())

    def changed(self, key: Key, before: Made | None, after: Made | None) -> None:
        self.count(key, before and before.passed, after and after.passed)

    def count(self, key: Key, before: Any, after: Any) -> None:
        """`before` (None: nothing) counted no more, `after` (None: nothing) counted."""
        for obj, step in ((before, -1), (after, 1)):
            if obj is None:
                continue
            for counts, value in zip(self._each, self.of(key, obj)):
                if value is not None:
                    counts[value] += step
                    if not counts[value]:
                        del counts[value]

    def __getitem__(self, name: str) -> Counter:
        return self._counts[name]


class Made(NamedTuple):
    """A stage's result of one object: what the next stage takes (None: nothing, the object is
    left out), and what it says: ObjectWarnings of objects left out (`bad`), warning lines."""

    passed: Any
    bad: tuple = ()
    lines: tuple = ()


_NOTHING = object()


class Stage:
    """One step of a look, made of each object on its own from the object and the stage's context
    (`step(object, context) -> Made`), kept from look to look."""

    def __init__(self, step: Callable[[Any, Any], Made], *watchers: Watcher, counts: Counts | None = None):
        self.step, self.counts = step, counts
        self.watchers = (*watchers, counts) if counts is not None else watchers
        self.context: Any = _NOTHING
        self.inputs: dict[Key, Any] = {}
        self.made: dict[Key, Made] = {}
        self.said: set[Key] = set()  # the keys whose result says something (bad or lines)

    def update(self, changes: dict[Key, Any], context: Any = None) -> dict[Key, Any]:
        """Take in `changes` (key -> the object now, None: gone), with this context; key -> what
        passes on now (None: nothing) for each object whose result changed."""
        fresh = context is not self.context and context != self.context
        if fresh:  # every object is made again
            self.context = context
            changes = {**self.inputs, **changes}
        out, inputs, kept, step = {}, self.inputs, self.made, self.step
        for key, now in changes.items():
            before = kept.get(key)
            if now is None:
                if before is not None:
                    del inputs[key], kept[key]
                    self._tell(key, before, None, out)
                continue
            was = inputs.get(key)
            if before is not None and not fresh and (was is now or was == now):
                continue  # the same object, or one read again that reads the same
            made = step(now, context)
            inputs[key] = now
            if before is not None and made == before:
                continue  # the same result: the one kept (what follows keeps its own)
            kept[key] = made
            self._tell(key, before, made, out)
        return out

    def _tell(self, key: Key, before: Made | None, after: Made | None, out: dict) -> None:
        for w in self.watchers:
            w.changed(key, before, after)
        if after is not None and (after.bad or after.lines):
            self.said.add(key)
        else:
            self.said.discard(key)
        if (before and before.passed) is not (after and after.passed):
            out[key] = after.passed if after is not None else None

    def bad(self) -> list:
        """The ObjectWarnings of the objects left out, in key order."""
        return [b for key in sorted(self.said) for b in self.made[key].bad]

    def lines(self) -> list[str]:
        """The warning lines, in key order."""
        return [line for key in sorted(self.said) for line in self.made[key].lines]
