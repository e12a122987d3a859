"""The shape of a rule: everything the planner asks of one rule of the policy, in one class.

A rule is one module of `gpu_policy.planner.rules` holding one `Rule` subclass (its
predicates beside it, in plain numbers). The planner makes one instance of every rule per
plan (`Rule(inputs)`), in the one order of `gpu_policy.planner.rules.RULES`, and asks each,
in that order, what it has to say at each step of a plan; a rule overrides only the steps it
takes part in, the others answer nothing:

  before the program  which running jobs it lets a waiting one take (`may_take`) or move
                      (`may_move`), and what of a job those read (`victim_key`), which
                      queues may take from which (`givers`), which nodes need their own
                      variables (`detail`), which jobs' replicas it tells apart (`apart`)
                      and confines to some nodes (`confine`), and the phase composition
                      needs (`grow_kinds`, `widen`, `extend`);
  the program         its variables (`variables`: before any rule's rows), its rows
                      (`rows`), its objective stages, each with its `rank` (`stages`);
  after the solve     what it decided (`decide`, `report`), what it adds to the plan's
                      summary (`summarize`), and which nodes packing prefers
                      (`node_order`);
  the reasons         why a job can never run (`why_never`), why it waits (`why_wait`), why
                      it is preempted (`why_preempt`) or moved (`why_move`), and what a
                      reason adds (`room_clause`, `preempt_clause`), with the codes it may
                      give (`codes`: code -> meaning; `reason` checks them).

The builder (`build`) adds every rule's variables, then every rule's rows, in the rules'
order, then builds the stages by rank: the strict order of the objectives is the order of
the ranks, and no rule needs to know where another's stages go.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.model.layout import Layout
from gpu_policy.model.signals import ClusterSignals
from gpu_policy.planner.config import PlannerConfig
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.scope import Scope

Objective = tuple[str, pulp.LpAffineExpression]  # a stage's name in the report, and what it minimises


@dataclass(frozen=True)
class Stage:
    """Objective stages at one rank, built when their turn comes (building one may add
    variables and rows, which the stages before it must not see). Lower ranks are solved
    first (docs/policy.md, "The program", lists them)."""

    rank: int
    build: Callable[[], list[Objective]]


@dataclass(frozen=True)
class PlanInputs:
    """What every rule of one plan may read from the start: the scenario, where its running
    replicas are, the telemetry and the settings."""

    scenario: Scenario
    layout: Layout
    signals: ClusterSignals | None
    config: PlannerConfig


class Rule:
    """One rule of the policy (the module docstring lists what the planner asks of it).
    Every method answers nothing until a rule overrides it."""

    name = "rule"
    #: The reason codes this rule gives, with what each means (never rename one: codes are an interface).
    codes: Mapping[str, str] = {}

    def __init__(self, inputs: PlanInputs):
        self.inputs = inputs

    def reason(self, code: str, text: str) -> Reason:
        """A reason of this rule: `code` must be one it declares."""
        if code not in self.codes:
            raise ValueError(f"reason code {code!r} is not declared by the rule {self.name!r}")
        return Reason(code, text)

    # -- before the program -------------------------------------------------------------------

    def givers(self, tree, shares, held: Mapping[str, float], waiting: list[Job]) -> dict[str, set[str]] | None:
        """For each queue with waiting work, the queues it may ever take GPUs from (None: no say)."""
        return None

    def apart(self, job: Job) -> Hashable:
        """What this rule must tell apart in `job`'s replicas from those of jobs alike in all
        else (None: nothing): the program places them as a shape of their own, so that the
        rule's rows can count them (per-model limits count each queue's)."""
        return None

    def victim_key(self, job: Job) -> Hashable:
        """What this rule's `may_take` and `may_move` read of a running job beyond its queue,
        priority and preemptibility (the scope judges jobs alike in all of it once); None: nothing."""
        return None

    def may_move(self, job: Job | None, claimant: Job | None) -> bool | None:
        """Whether the running `job` (None: any) may be moved, for a start of `claimant`
        (None: any): False forbids it, None says nothing (every job that may be preempted may
        be moved unless a rule forbids it)."""
        return None

    def may_take(self, victim: Job, claimant: Job | None, givers: set[str]) -> bool | None:
        """Whether a start of `claimant` (None: any waiting job of another queue whose
        `givers` may be taken from) may take the GPUs of the running `victim`: True lets it,
        False forbids it, None says nothing (a victim needs one rule to let it and none to
        forbid it)."""
        return None

    def detail(self) -> set[str]:
        """Nodes that need their own variables in every plan."""
        return set()

    def pool_group(self, node: str) -> Hashable:
        """What keeps a pooled node apart from pooled nodes alike in all else (None: nothing):
        nodes of different groups are pooled apart, so that the rule's rows can tell their
        GPUs apart (the topology's domains)."""
        return None

    def confine(self, job: Job) -> frozenset[str] | None:
        """The only nodes the waiting `job`'s replicas may go to (None: no say): the greedy pass
        of a large cluster looks for room there only, and the program places the job on those
        of them it details and on the pools all of whose nodes are among them (`pool_group`
        keeps pools apart where that matters); the rule tells the job `apart`, so that its
        shape is its own."""
        return None

    def grow_kinds(self, kinds, constraints):
        """The cluster's node kinds as they could become in this plan (composition)."""
        return kinds

    def widen(self, sc: Scope) -> None:
        """Open what the scope must see beyond what the greedy pass chose (composition)."""

    def extend(self, layout: Layout) -> Layout:
        """The layout the program places on (composition: free slots for GPUs to attach)."""
        return layout

    # -- the program --------------------------------------------------------------------------

    def variables(self, ctx: PlanContext) -> None:
        """Add decisions every rule's rows may read (before any rule's `rows`)."""

    def rows(self, ctx: PlanContext) -> None:
        """Add the rule's constraint rows to `ctx.m`."""

    def stages(self, ctx: PlanContext) -> list[Stage]:
        """The rule's objective stages (none: a rule of rows only)."""
        return []

    # -- after the solve ----------------------------------------------------------------------

    def decide(self, m: PlanProgram, after: Layout, decided: bool) -> None:
        """Read what the solved program `m` decided for the rule's own part (`after`: the
        cluster after the plan, which it may trim; `decided`: solved to its end)."""

    def report(self, changes: list, jobs: Mapping[str, Job]) -> list:
        """What the rule adds to the Plan beside the jobs' decisions (compositions), given the
        decisions other than keep (`changes`, whose reasons it may complete)."""
        return []

    def summarize(self, after: Layout) -> dict:
        """Fields the rule adds to the plan's summary, read on the cluster `after` the plan."""
        return {}

    def node_order(self, layout: Layout) -> Mapping[str, float] | None:
        """Per node, what packing replicas onto pooled nodes minimises first, before its own
        prices (lower first; None: no say)."""
        return None

    # -- the reasons --------------------------------------------------------------------------

    def why_never(self, job: Job, judged: Judged) -> Reason | None:
        """Why the job could never run on this cluster (it waits until the cluster changes)."""
        return None

    def why_wait(self, job: Job, judged: Judged) -> Reason | None:
        """Why the job waits after this plan, judged on the state the plan leaves."""
        return None

    def room_clause(self, job: Job, judged: Judged) -> str | None:
        """What the rule adds to a reason that the free GPUs cannot hold the job."""
        return None

    def why_preempt(self, job: Job, judged: Judged, started: Mapping[str, list[Job]]) -> Reason | None:
        """Why the running job is preempted (`started`: the jobs the plan starts, per queue)."""
        return None

    def preempt_clause(self, job: Job, judged: Judged) -> str | None:
        """What the rule adds to the reason a job is preempted."""
        return None

    def why_move(self, job: Job, to: list, started: Mapping[str, list]) -> Reason | None:
        """Why the running job restarts on the placements `to` (`started`: per started job,
        its placements)."""
        return None


def build(ctx: PlanContext, rules: list[Rule]) -> None:
    """Every rule's variables, then every rule's rows, in the order of `rules`, then the
    stages by rank (rules of one rank in their order); stages with nothing to decide are
    left out."""
    for rule in rules:
        rule.variables(ctx)
    for rule in rules:
        rule.rows(ctx)
    declared = sorted((stage for rule in rules for stage in rule.stages(ctx)), key=lambda stage: stage.rank)
    objectives = [objective for stage in declared for objective in stage.build()]
    ctx.m.stages = [(name, expr) for name, expr in objectives
                    if isinstance(expr, pulp.LpAffineExpression) and len(expr)]
