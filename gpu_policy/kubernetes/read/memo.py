"""What one look keeps for the next: the controller's looks, one per round, make again only what
the watch events changed (issue 42: at 5,000 nodes and 21,000 pods, a look that made everything
again took as long as the plan, and one that passed over every pod and job to find what to keep
took half of it).

A look is made of stages kept here by name (gpu_policy.kubernetes.read.kept): each pod's and
node's steps, the jobs of the pods (gpu_policy.kubernetes.read.kept_jobs) and the scenario's
nodes. Each is told what changed since the last look and makes only that again; what did not
change is the object the last look gave. A kept job's fields that change with the time alone
(how long it has run, waited, gone without a checkpoint) are set anew on a copy, only for the
jobs whose ages changed (`progress.Aging`). The checks a scenario passes (`check_built`) run
whole on a memo's first look, then only on what changed (`check_changed`). Kept objects are
shared from look to look: nothing that reads a scenario may change them (a test plans twice and
compares). A look that does not end (an error, a bad object) leaves nothing kept: the next makes
everything again. A one-shot command looks once, with a memo of its own that keeps nothing after.
"""

from __future__ import annotations

from typing import Any, Callable


class LookMemo:
    """The stages of the last look, by name, and whether its scenario passed the checks."""

    def __init__(self):
        self._kept: dict[str, Any] = {}
        self._open = False
        self.checked = False  # a look of this memo passed the scenario's checks: the next checks what changed

    def begin(self) -> None:
        """A look starts: when the last one did not end, nothing of it is kept."""
        if self._open:
            self._kept.clear()
            self.checked = False
        self._open = True

    def end(self) -> None:
        """The look ended: what it made stands for the next."""
        self._open = False

    def kept(self, name: str, make: Callable[[], Any]) -> Any:
        """What is kept under `name`, made by `make()` on the memo's first look."""
        if name not in self._kept:
            self._kept[name] = make()
        return self._kept[name]
