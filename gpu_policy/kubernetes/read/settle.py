"""Which of gpu-policy's Online devices a composable node's allocatable GPUs count, across looks.

The device plugin counts attached GPUs in the node's allocatable a little after the CDI
operator marks them Online, and uncounts detached ones a little after they go
(docs/composition.md, "Decisions"). One look cannot always tell: a node with 4 allocatable
GPUs and 4 Online devices may hold 4 of its own (not counted yet) or none. Successive
looks can: when the Online devices change and the allocatable GPUs do not, the node has not
counted the change yet. From then, for at most `settle_s` or until its allocatable GPUs
change (the device plugin re-registered), the node is *settling*: its allocatable GPUs are
read as counting the devices Online before the change, and it is not composed (nothing
attached to it or detached from it), so a plan made in the lag neither attaches again for
work already served nor detaches GPUs that went already.

A look with no memory of the node (a one-shot `apply`, the first look of a controller)
reads allocatable GPUs fewer than the Online devices as counting none of them, else as
counting all of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Seen:
    allocatable: int  # the node's allocatable GPUs at the last look
    online: int  # gpu-policy's devices Online on it at the last look
    counted: int  # of those, what its allocatable GPUs count
    since: float | None = None  # when the Online devices changed and the allocatable did not
    ahead: int = 0  # what the allocatable changed by since the Online devices last did (the plugin first)


def _one_look(allocatable: int, online: int) -> int:
    return online if allocatable >= online else 0


class DevicePluginLag:
    """The memory of one planner (a controller, or one execution) across its looks."""

    def __init__(self, settle_s: float):
        self.settle_s = settle_s
        self._nodes: dict[str, _Seen] = {}

    def counted(self, node: str, allocatable: int, online: int, now: float) -> tuple[int, bool]:
        """(The Online devices the node's allocatable GPUs count, whether the node is settling)."""
        seen = self._nodes.get(node)
        alone = _Seen(allocatable, online, _one_look(allocatable, online))
        if seen is None or (allocatable != seen.allocatable and (online != seen.online or seen.since is not None)):
            seen = alone  # first seen, or the plugin counted with the operator or after it
        elif allocatable != seen.allocatable:  # the plugin before the operator's status: matched when it comes
            seen = _Seen(allocatable, online, alone.counted, ahead=seen.ahead + allocatable - seen.allocatable)
        elif online != seen.online and seen.since is None:
            lag = online - seen.online != seen.ahead
            seen = _Seen(allocatable, online, seen.counted, since=now) if lag else alone
        else:
            seen = _Seen(allocatable, online, seen.counted, seen.since, seen.ahead)
        if seen.since is not None and now - seen.since >= self.settle_s:
            seen = alone
        seen.counted = min(seen.counted, allocatable)
        self._nodes[node] = seen
        return seen.counted, seen.since is not None
