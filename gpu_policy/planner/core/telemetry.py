"""What DCGM telemetry changes for the planner: unhealthy GPUs get no new work, busy
GPUs and GPUs short of framebuffer get no new fractions, idle jobs go first."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

from gpu_policy.model import Scenario
from gpu_policy.model.signals import ClusterSignals


@dataclass(frozen=True)
class GpuLimits:
    """What telemetry says about GPUs, as far as placement cares."""

    busy: frozenset[tuple[str, int]] = frozenset()  # no new fractional job while its occupants stay
    memory_free_mib: dict = field(default_factory=dict)  # (node, gpu) -> (free, total)
    idle_jobs: dict = field(default_factory=dict)  # running job -> seconds idle

    def room_for_fraction(self, node: str, gpu: int, fraction: float) -> bool:
        """Judged with the GPU's occupants staying; a GPU they all leave is free."""
        if (node, gpu) in self.busy:
            return False
        free, total = self.memory_free_mib.get((node, gpu), (None, None))
        return free is None or total is None or free >= fraction * total


def with_unhealthy(s: Scenario, signals: ClusterSignals) -> Scenario:
    """The scenario with GPUs that telemetry finds unhealthy marked so: no new work."""
    bad: dict[str, set[int]] = defaultdict(set)
    for key in signals.unhealthy():
        bad[key.node].add(key.gpu)
    nodes = [dataclasses.replace(n, unhealthy_gpus=sorted(set(n.unhealthy_gpus) | {g for g in bad[n.name] if g < n.gpus}))
             for n in s.nodes]
    return dataclasses.replace(s, nodes=nodes)


def gpu_limits(signals: ClusterSignals | None) -> GpuLimits:
    if signals is None:
        return GpuLimits()
    return GpuLimits(
        busy=frozenset((k.node, k.gpu) for k, g in signals.gpus.items() if g.busy),
        memory_free_mib={(k.node, k.gpu): (g.memory_free_mib, g.memory_total_mib) for k, g in signals.gpus.items()},
        idle_jobs=dict(signals.idle_jobs),
    )
