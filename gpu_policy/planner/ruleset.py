"""The rules of one plan, asked together: one instance of every rule of `RULES`, in its
order. The scope asks it who may take from whom and what a victim costs (`ScopeRules`), the
builder adds every rule's variables, rows and stages, the reasons ask each rule in turn and
take the first answer, and the phases a rule needs (composition) run at their step."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping

from gpu_policy.model import Job
from gpu_policy.model.layout import Layout
from gpu_policy.model.plan import Composition, JobDecision, Placement
from gpu_policy.planner.core.codes import Reason
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.rule import PlanInputs, Rule, build
from gpu_policy.planner.core.scope import Scope, Standing
from gpu_policy.planner.core.shapes import Apart, NodeKind
from gpu_policy.planner.core.telemetry import GpuLimits
from gpu_policy.planner.rules import RULES
from gpu_policy.planner.rules.fits import no_room
from gpu_policy.planner.rules.victims import Victims, add_cost, victim_order_key


class RuleSet:
    """Every rule of one plan (`RULES`, instantiated on its inputs), in order."""

    def __init__(self, rules: list[Rule]):
        self.rules = rules
        self.victims = next((r for r in rules if isinstance(r, Victims)), None)
        self.keying = [rule for rule in rules if type(rule).victim_key is not Rule.victim_key]
        self.confining = [rule for rule in rules if type(rule).confine is not Rule.confine]
        self.grouping = [rule for rule in rules if type(rule).pool_group is not Rule.pool_group]

    @classmethod
    def for_plan(cls, inputs: PlanInputs) -> RuleSet:
        """Every rule of `RULES`, made for one plan's `inputs`."""
        return cls([rule(inputs) for rule in RULES])

    # -- before the program (the scope, `gpu_policy.planner.core.scope.ScopeRules`) --------------

    def givers(self, st: Standing, waiting: list[Job]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for rule in self.rules:
            for queue, givers in (rule.givers(st.tree, st.shares, st.held, waiting) or {}).items():
                out.setdefault(queue, set()).update(givers)
        return out

    def may_take(self, victim: Job, claimant: Job | None, givers: set[str]) -> bool:
        """The victim is preemptible (a non-preemptible job is never preempted or moved), some
        rule lets the claimant take its GPUs, and none forbids it."""
        if not victim.is_preemptible:
            return False
        verdicts = [rule.may_take(victim, claimant, givers) for rule in self.rules]
        return True in verdicts and False not in verdicts

    def victim_key(self, job: Job) -> Hashable:
        """What `may_take` and `may_move` read of a victim: its queue, its priority and whether
        it is preemptible (which its priority and its own `preemptible` decide: read as given,
        it costs no property), and what the rules that read more say (`Rule.victim_key`)."""
        if not self.keying:
            return (job.queue, job.priority, job.preemptible)
        return (job.queue, job.priority, job.preemptible, *(rule.victim_key(job) for rule in self.keying))

    def may_move(self, job: Job | None, claimant: Job | None) -> bool:
        """No rule forbids moving `job` (None: any) for `claimant` (None: any)."""
        return all(rule.may_move(job, claimant) is not False for rule in self.rules)

    def victim_cost(self, victim: Job, st: Standing, limits: GpuLimits) -> tuple:
        return self.victims.cost(victim, st, limits)

    @staticmethod
    def victim_order_key(victim: Job, cost: tuple) -> tuple:
        return victim_order_key(victim, cost)

    @staticmethod
    def add_cost(total: tuple, cost: tuple) -> tuple:
        return add_cost(total, cost)

    def lost_work(self, job: Job) -> float:
        return self.victims.lost(job)

    def apart(self) -> Apart:
        """What the rules tell apart in a job's replicas (`Rule.apart`): None where no rule
        tells anything apart, which keeps every shape as it is and costs nothing per job."""
        telling = [rule for rule in self.rules if type(rule).apart is not Rule.apart]
        if not telling:
            return None
        return lambda job: tuple(rule.apart(job) for rule in telling)

    def detail(self) -> set[str]:
        return set().union(*(rule.detail() for rule in self.rules))

    def pool_group(self, node: str) -> Hashable:
        """What keeps a pooled node apart (`Rule.pool_group`): None where no rule says anything."""
        groups = tuple(rule.pool_group(node) for rule in self.grouping)
        return None if all(g is None for g in groups) else groups

    def confine(self, job: Job) -> frozenset[str] | None:
        """The nodes every rule that confines `job` lets it use (None: no rule confines it)."""
        found = None
        for rule in self.confining:
            mine = rule.confine(job)
            if mine is not None:
                found = mine if found is None else found & mine
        return found

    def grow_kinds(self, kinds: Counter[NodeKind], constraints: frozenset | None) -> Counter[NodeKind]:
        for rule in self.rules:
            kinds = rule.grow_kinds(kinds, constraints)
        return kinds

    def widen(self, sc: Scope) -> None:
        for rule in self.rules:
            rule.widen(sc)

    def extend(self, layout: Layout) -> Layout:
        for rule in self.rules:
            layout = rule.extend(layout)
        return layout

    # -- the program and after it -------------------------------------------------------------

    def build(self, ctx: PlanContext) -> None:
        build(ctx, self.rules)

    def decide(self, m: PlanProgram, after: Layout, decided: bool) -> None:
        for rule in self.rules:
            rule.decide(m, after, decided)

    def report(self, changes: list[JobDecision], jobs: Mapping[str, Job]) -> list[Composition]:
        return [item for rule in self.rules for item in rule.report(changes, jobs)]

    def summarize(self, after: Layout) -> dict:
        return {key: value for rule in self.rules for key, value in rule.summarize(after).items()}

    def node_order(self, layout: Layout) -> Mapping[str, float] | None:
        """What packing prefers first (`Rule.node_order`): the first rule's that has a say."""
        return next((order for rule in self.rules if (order := rule.node_order(layout)) is not None), None)

    # -- the reasons ----------------------------------------------------------------------------

    def no_room(self, job: Job, judged: Judged) -> Reason | None:
        """Why the free room the plan leaves cannot hold the job (the fits rule's answer), with
        what each rule adds to it (why attaching GPUs does not help); None if it could."""
        room = no_room(job, judged.room_for(job), judged.limits)
        if room is None:
            return None
        for rule in self.rules:
            room = room.with_clause(rule.room_clause(job, judged))
        return room

    def wait_reason(self, job: Job, judged: Judged) -> Reason:
        """Why `job` waits: its queue's admission, then why it could never run (the cluster's
        shape: no plan changes it), then the plan's own outcome, then each rule in order, on
        the state the plan leaves."""
        if job.name in judged.refused:
            return Reason("NotAllowedInQueue", judged.refused[job.name])
        for rule in self.rules:
            if reason := rule.why_never(job, judged):
                return reason
        if job.name in judged.unplaced:
            return Reason("NotPlacedYet", "the plan chose it, but placing it found no node with room; it starts in "
                                          "a later plan")
        for rule in self.rules:
            if reason := rule.why_wait(job, judged):
                return reason
        return Reason("NoRuleApplies", "free GPUs would fit it, but starting it breaks no rule the plan knows")

    def preempt_reason(self, job: Job, judged: Judged, started: Mapping[str, list[Job]]) -> Reason:
        """Why a running job is preempted (`started`: the jobs the plan starts, per queue, so
        that each reason reads only its own queue's starts), with what each rule adds (an
        idle job says so)."""
        q = job.queue
        why = next((reason for rule in self.rules if (reason := rule.why_preempt(job, judged, started))),
                   Reason("Preempted", f"preempted: {q} held {judged.before[q]:g} GPUs and keeps {judged.after[q]:g}"))
        for rule in self.rules:
            why = why.with_clause(rule.preempt_clause(job, judged))
        return why

    def move_reason(self, job: Job, to: list[Placement], started: Mapping[str, list[Placement]]) -> Reason:
        """Why a running job restarts elsewhere (the moves rule says)."""
        return next(reason for rule in self.rules if (reason := rule.why_move(job, to, started)))
