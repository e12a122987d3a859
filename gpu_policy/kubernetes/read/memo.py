"""What one look keeps for the next: the controller's looks, one per round, rebuild only what the
watch events changed (issue 42: at 5,000 nodes and 21,000 pods, rebuilding every job and node
and checking each again took as long as the plan).

Each job and node of the scenario is kept with what it was built from (its pods' views, its
node's view and the GPUs, CPU and memory its pods hold there) and what the whole look decides for
all of them (the queues a pod may name; the node labels some job selects). A look whose inputs
for an object are the same views (or equal ones) and the same context gets the object it was
given before; one whose inputs changed gets a new one. A kept job's fields that change with the
time alone (how long it has run, waited, gone without a checkpoint) are set anew on a copy
(`retimed`). The checks a scenario passes (`check_built`) check the fields of each kept object
once, when it is built, and only those set anew on a copy. Kept objects are
shared from look to look: nothing that reads a scenario may change them (a test plans twice and
compares). A one-shot command looks once, with a memo of its own that keeps nothing after.
"""

from __future__ import annotations

from typing import Callable


class _Kept:
    """One object as built (`made`: the job or node first, then what goes with it), from what."""

    __slots__ = ("inputs", "made", "warnings")

    def __init__(self, inputs: tuple, made: tuple, warnings: list[str]):
        self.inputs, self.made, self.warnings = inputs, made, warnings


class LookMemo:
    """The jobs and nodes of the last look, by kind and name, and which of them passed the
    scenario's field checks."""

    def __init__(self):
        self._kept: dict[str, dict[str, _Kept]] = {}
        self._context: dict[str, object] = {}
        self._used: dict[str, set[str]] = {}
        self._checked: set[int] = set()  # ids of kept objects whose fields were checked (all held in _kept)
        self._fresh: set[int] = set()  # ids of those built by this look, not checked yet
        self._retimed: dict[str, tuple[object, tuple[str, ...]]] = {}  # job -> its copy of this look, fields set

    def begin(self, kind: str, context: object) -> None:
        """A new look at `kind` ("jobs", "nodes"): with another `context` (what every object of
        the kind depends on beside its own inputs), nothing kept of it stands."""
        if self._context.get(kind, _NOTHING) != context:
            for kept in self._kept.pop(kind, {}).values():
                self._forget(kept)
            self._context[kind] = context
        self._kept.setdefault(kind, {})
        self._used[kind] = set()

    def get(self, kind: str, name: str, inputs: tuple, build: Callable[[list[str]], tuple],
            warnings: list[str]) -> tuple:
        """What `build(its warnings)` makes of `inputs` for `name` (the job or node first): kept
        from the last look when the inputs are the same, else built now and kept; its warnings
        are added to `warnings`."""
        kept = self._kept[kind].get(name)
        self._used[kind].add(name)
        # the same inputs: each the very object, or an equal one (a watch event that changed nothing a
        # look reads gives an equal view); tuples compare so, element by element
        if kept is None or kept.inputs != inputs:
            if kept is not None:
                self._forget(kept)
            mine: list[str] = []
            kept = self._kept[kind][name] = _Kept(inputs, build(mine), mine)
            if kept.made[0] is not None:
                self._fresh.add(id(kept.made[0]))
        warnings.extend(kept.warnings)
        return kept.made

    def retimed(self, job, timed: dict):
        """`job` (as `get` gave it) with the fields of `timed` as it says: the very job when they
        are the same, else a copy whose other fields, when the job's passed the checks, are not
        checked again."""
        fields = vars(job)
        for k, v in timed.items():
            if fields[k] != v:
                break
        else:
            return job
        made = object.__new__(type(job))  # a dataclass's copy, without its __init__ (21,000 jobs a look)
        made.__dict__ = {**fields, **timed}
        if id(job) in self._checked:
            self._retimed[job.name] = made, tuple(timed)
        return made

    def end(self) -> None:
        """The look is built: forget what it did not use (jobs and nodes that are gone)."""
        for kind, kept in self._kept.items():
            for name in set(kept) - self._used.get(kind, set()):
                self._forget(kept.pop(name))
        for name in set(self._retimed) - self._used.get("jobs", set()):
            del self._retimed[name]

    def unchecked(self, item) -> tuple[str, ...] | None:
        """The fields of `item` the scenario's checks must still check: none of a kept object
        that passed them before, those `retimed` set on its copy, else (None) all."""
        if id(item) in self._checked:
            return ()
        copied = self._retimed.get(getattr(item, "name", None))
        return copied[1] if copied is not None and copied[0] is item else None

    def passed(self) -> None:
        """The look's scenario passed its checks: what it built need not be checked again."""
        self._checked |= self._fresh
        self._fresh.clear()

    def _forget(self, kept: _Kept) -> None:
        self._checked.discard(id(kept.made[0]))
        self._fresh.discard(id(kept.made[0]))


_NOTHING = object()
