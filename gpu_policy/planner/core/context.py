"""What every rule of one plan's program reads: the scenario and the state before the plan,
the program's decisions, what each queue holds after the plan (`accounts`, read once on
first use), and what of it counts toward its shares (`credits`, which the claims rule's rows
write: the rules after it in `gpu_policy.planner.rules.RULES` read them)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from gpu_policy.model import Job, Scenario
from gpu_policy.model.layout import Layout
from gpu_policy.packing.fragmentation import WorkloadMix
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.scope import Scope, Standing
from gpu_policy.planner.core.telemetry import GpuLimits


@dataclass
class Credit:
    """What of a queue counts toward its shares (terms, constant), and of that, its starts."""

    terms: dict
    const: float
    claimed: dict  # {starts or their counted part: GPUs}


@dataclass
class Accounts:
    """Per leaf queue, what it holds after the plan as (terms, constant): kept or moved
    running jobs, and started jobs."""

    kept: dict[str, tuple[dict, float]] = field(default_factory=dict)
    new: dict[str, dict] = field(default_factory=dict)
    jobs: dict[str, list[Job]] = field(default_factory=dict)  # leaf -> its jobs
    running: dict[str, list[float]] = field(default_factory=dict)  # leaf -> GPUs of each of its running jobs
    decided: dict[str, list[Job]] = field(default_factory=dict)  # leaf -> its running jobs the program
    # decides to keep, move or preempt (`PlanProgram.decided`)
    candidates: list[Job] = field(default_factory=list)  # those of every leaf, in the scenario's order

    def held(self, leaves: list[str]) -> tuple[dict, float]:
        terms: dict = defaultdict(float)
        const = 0.0
        for q in leaves:
            t, c = self.kept[q]
            for v, a in list(t.items()) + list(self.new[q].items()):
                terms[v] += a
            const += c
        return dict(terms), const


def accounts(m: PlanProgram, s: Scenario, st: Standing) -> Accounts:
    """Read once, in the scenario's order: what each leaf holds after the plan, its jobs,
    and the running ones the program decides."""
    out = Accounts()
    terms: dict[str, dict] = {}
    const: dict[str, float] = {}
    for q in st.tree.leaves:
        out.jobs[q], out.running[q], out.decided[q] = [], [], []
        terms[q], const[q] = {}, 0.0
        out.new[q] = {}
    for kind, var in m.decisions.starts.items():
        out.new[kind.queue][var] = kind.total_gpus
    decided = m.decided()
    jobs, running = out.jobs, out.running  # read once, not per job
    for job in s.jobs:
        q = job.queue
        jobs[q].append(job)
        if not job.running:
            continue
        gpus = job.total_gpus
        running[q].append(gpus)
        if job.name not in decided:  # it runs after the plan
            const[q] += gpus
            continue
        out.decided[q].append(job)
        out.candidates.append(job)
        runs, once = m.runs(job)
        mine = terms[q]
        for v, a in runs.items():
            mine[v] = mine.get(v, 0) + a * gpus
        const[q] += once * gpus
    out.kept = {q: (terms[q], const[q]) for q in st.tree.leaves}
    return out


@dataclass
class PlanContext:
    """One plan's program and what its rules read."""

    m: PlanProgram
    scenario: Scenario
    layout: Layout            # the cluster now, with a free slot for each GPU a composable node could take
    scope: Scope
    standing: Standing
    config: PlannerConfig
    limits: GpuLimits
    order: list[Job]          # waiting jobs in start order (rules.claims.start_order)
    mix: WorkloadMix | None   # the workload mix packing prices placements for (None: no packing stage)
    credits: dict[str, Credit] = field(default_factory=dict)  # per leaf queue: written by the claims rule's rows

    @cached_property
    def accounts(self) -> Accounts:
        """Per leaf queue, what it holds after the plan."""
        return accounts(self.m, self.scenario, self.standing)
