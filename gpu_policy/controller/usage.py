"""The leader's usage history (fair share over time; docs/kubernetes.md, "Usage history").

While the policy sets `usage_half_life_s`, the leader counts the GPUs each queue holds in each
of its looks (`held_after`: running pods and pods released but not bound yet, and what the
round released), on the controller's own clock, and decays them exactly
(gpu_policy.model.usage). It writes them to the ConfigMap `gpu-policy-usage` a minute after
its last write while anything was held since (at most, and at least, once a minute), fenced
like every write. On taking the lead, and when the policy starts keeping usage, its first
look reads that ConfigMap and continues from it, decayed to now, and counts for the time
since its last write what the jobs it finds running held in it (as long as each has run,
`held_before`): a leader that steps down writes first, and one that is killed loses only what
jobs that ended meanwhile held. One that is missing, unreadable or from the future is
said in a log line and in the warnings of every plan until the next write replaces it; the
plan goes on with an empty history.
"""

from __future__ import annotations

import logging

from gpu_policy.errors import ClusterAccessDenied, ClusterUnavailable
from gpu_policy.kubernetes.names import USAGE_CONFIGMAP
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.kubernetes.read.usage import held_before, held_gpus, read_usage
from gpu_policy.kubernetes.write.usage import write_usage
from gpu_policy.model import Policy
from gpu_policy.model.cluster import Outcome
from gpu_policy.model.usage import UsageHistory

log = logging.getLogger(__name__)

#: the contract's minute: between two writes while GPUs are held, at most and at least
WRITE_EVERY_S = 60.0


def held_after(snap: Snapshot, outcomes: list[Outcome]) -> dict[str, float]:
    """The GPUs each queue holds after a round: what its look found held, and the pods the
    round released (they hold their node's GPUs from now on)."""
    held = held_gpus(snap)
    jobs = {j.name: j for j in snap.scenario.jobs}
    for o in outcomes:
        if o.action == "release" and o.result == "done" and o.job in jobs:
            job = jobs[o.job]
            held[job.queue] = held.get(job.queue, 0.0) + job.gpus * len(o.pods)
    return held


class UsageKeeper:
    """The history the leader keeps; called by each look (a `UsageLook`) for the queues' usage.
    `client` reads and writes the ConfigMap; `check` is the fence every write passes;
    `read_config_map` reads it before each write (the controller's cache: no GET per write)."""

    def __init__(self, client, namespace: str, check, read_config_map=None):
        self.client, self.namespace, self.check, self.read_config_map = client, namespace, check, read_config_map
        self.history: UsageHistory | None = None  # None: not kept (standing by, or no half-life)
        self.held: dict[str, float] = {}  # GPUs per queue since the last look
        self.problem: str | None = None  # what was wrong with the ConfigMap, until a write replaces it
        self.written_at = 0.0  # wall time of the last write (or of the read, for the first)
        self.unwritten = False  # GPUs were held since the last write
        self.unseen_s = 0.0  # seconds from the history's last write to its reading, counted at the next `hold`

    def __call__(self, policy: Policy, now: float) -> tuple[dict[str, float], list[str]]:
        """The queues' GPU-hours at `now` (the look's time), and the problem to warn about."""
        if policy.usage_half_life_s is None:
            self.stop()
            return {}, []
        if self.history is None:
            try:
                config_map = self.client.read_config_map(USAGE_CONFIGMAP)
            except (ClusterUnavailable, ClusterAccessDenied) as e:
                log.warning("could not read the usage history: %s", e)
                return {}, [f"the usage history could not be read ({e}): planned without it, read again next round"]
            self._start(read_usage(config_map, now, policy.usage_half_life_s, self.namespace), now)
        self.history.half_life_s = policy.usage_half_life_s
        self.history.add(self.held, now - self.history.at)
        return dict(self.history.gpu_h), [self.problem] if self.problem else []

    def _start(self, read, now: float) -> None:
        self.history, self.problem, self.held = read.history, read.problem, {}
        self.written_at, self.unwritten = now, False
        self.unseen_s = max(0.0, now - read.written_at) if read.written_at is not None else 0.0
        if self.problem:
            log.warning("%s", self.problem)

    def hold(self, snap: Snapshot, outcomes: list[Outcome]) -> None:
        """What each queue holds from now until the next look (`held_after` the round): counted
        only while the history is kept (a pass over every job, 0.01 s at 21,000)."""
        if self.history is not None:
            if self.unseen_s > 0:  # the look's jobs, for the time since the history was last written
                self.history.add_before(held_before(snap, self.unseen_s))
                self.unseen_s = 0.0
            self.held = held_after(snap, outcomes)
            self.unwritten |= any(gpus > 0 for gpus in self.held.values())

    def due_in(self, now: float) -> float | None:
        """Seconds until the next write (0: now); None when none is needed (nothing held since the
        last write, nothing to replace)."""
        if self.history is None or not (self.unwritten or self.problem):
            return None
        return max(0.0, self.written_at + WRITE_EVERY_S - now)

    def write(self, now: float) -> None:
        """Write the history, counted up to `now`. ClusterBusy (the lease lost) goes to the caller;
        an API server that does not answer is said in a log line, and tried again a minute later."""
        self.history.add(self.held, now - self.history.at)
        try:
            write_usage(self.client, self.history, self.check, self.read_config_map)
        except (ClusterUnavailable, ClusterAccessDenied) as e:
            log.warning("could not write the usage history: %s; trying again in %g s", e, WRITE_EVERY_S)
        else:
            self.problem = None
            self.unwritten = any(gpus > 0 for gpus in self.held.values())
        self.written_at = now

    def stop(self) -> None:
        """Keep no history (standing by, or the policy keeps no usage): the next one is read again."""
        self.history, self.held, self.problem, self.unwritten, self.unseen_s = None, {}, None, False, 0.0
