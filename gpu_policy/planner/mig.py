"""MIG slices: a MIG job takes one slice of its profile per replica, and a node holds only the
slices its MIG layout has (`Node.mig`). Packing and fair share see each slice as the fraction
of its GPU that the job's `gpus` says (the profile's memory share); this row adds what a
fraction alone cannot say: how many slices of each profile there are."""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

import pulp

from gpu_policy.model import Scenario
from gpu_policy.planner.layout import NodeLayout


def slice_rows(m, s: Scenario, nl: NodeLayout, n: str, stays: Callable[[str], pulp.LpVariable | None]) -> None:
    """For each MIG profile of node n: slices kept + slices placed <= the node's slices."""
    node = nl.node
    if not node.mig:
        return
    jobs = {j.name: j for j in s.jobs if j.mig_profile}
    terms: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    fixed: dict[str, float] = defaultdict(float)
    for slot in nl.slots:
        for name, _ in slot.fractions:
            if name in jobs:
                profile, keep = jobs[name].mig_profile, stays(name)
                if keep is None:
                    fixed[profile] += 1
                else:
                    terms[profile][keep] += 1
    for (node_name, _, shape), var in m.frac.items():
        if node_name == n and shape.mig_profile:
            terms[shape.mig_profile][var] += 1
    for profile, count in sorted(node.mig.items()):
        if terms[profile]:
            # slices of the profile kept and placed on node n <= its slices of the profile
            m.add(pulp.LpAffineExpression(list(terms[profile].items()), fixed[profile]) <= count, "mig")


def free_slices(s: Scenario, layout, profile: str) -> int:
    """Slices of `profile` that no job holds in `layout`, over the whole cluster."""
    held: dict[str, int] = defaultdict(int)
    jobs = {j.name for j in s.jobs if j.mig_profile == profile}
    for n, nl in layout.nodes.items():
        held[n] = sum(1 for slot in nl.slots for name, _ in slot.fractions if name in jobs)
    return sum(max(0, n.mig.get(profile, 0) - held[n.name]) for n in s.nodes)
