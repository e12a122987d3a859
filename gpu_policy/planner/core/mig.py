"""MIG slices: a MIG job takes one slice of its profile per replica, and a node holds only the
slices its MIG layout has (`Node.mig`). Packing and fair share see each slice as the fraction
of its GPU that the job's `gpus` says (the profile's memory share); the program's row for the
slices of each profile is `rules.fits.slice_rows`, and this module counts the slices left
free, for the reasons a plan gives."""

from __future__ import annotations

from collections import defaultdict

from gpu_policy.model import Scenario


def free_slices(s: Scenario, layout, profile: str) -> int:
    """Slices of `profile` that no job holds in `layout`, over the whole cluster."""
    held: dict[str, int] = defaultdict(int)
    jobs = {j.name for j in s.jobs if j.mig_profile == profile}
    for n, nl in layout.nodes.items():
        held[n] = sum(1 for slot in nl.slots for name, _ in slot.fractions if name in jobs)
    return sum(max(0, n.mig.get(profile, 0) - held[n.name]) for n in s.nodes)
