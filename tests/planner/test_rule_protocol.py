"""The program is built by a loop over the rules (gpu_policy.planner.core.rule): every rule's
variables, then every rule's rows, in the rules' order, then every stage by its rank; the
reasons are asked in the rules' order too (gpu_policy.planner.ruleset)."""

from types import SimpleNamespace

import pulp
import pytest

from gpu_policy import load_scenario, plan
from gpu_policy.model import Job
from gpu_policy.planner.codes import CODES
from gpu_policy.planner.core.codes import CORE_CODES, Reason
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import PlanProgram
from gpu_policy.planner.core.rule import Rule, Stage, build
from gpu_policy.planner.rules import RULES
from gpu_policy.planner.ruleset import RuleSet
from tests.conftest import SCENARIOS


class _Rule(Rule):
    """A rule that records when its variables and rows are added and declares stages of the given ranks."""

    def __init__(self, name, ranks, calls):
        self.name, self.ranks, self.calls = name, ranks, calls

    def variables(self, ctx):
        self.calls.append(f"variables {self.name}")

    def rows(self, ctx):
        self.calls.append(f"rows {self.name}")

    def stages(self, ctx):
        return [Stage(rank, self._stage(ctx, rank)) for rank in self.ranks]

    def _stage(self, ctx, rank):
        def made():
            self.calls.append(f"stage {rank}")
            if rank == 80:  # nothing to decide: left out
                return [("empty", affine({}))]
            return [(f"{self.name}_{rank}", affine({ctx.m.var("x", 0, 1): 1}))]
        return made


def test_variables_then_rows_in_rule_order_then_stages_by_rank():
    calls = []
    ctx = SimpleNamespace(m=PlanProgram(pulp.LpProblem("p", pulp.LpMinimize)))
    build(ctx, [_Rule("late", [100, 80, 60], calls), _Rule("early", [10], calls)])
    assert [name for name, _ in ctx.m.stages] == ["early_10", "late_60", "late_100"]
    assert calls == ["variables late", "variables early", "rows late", "rows early",
                     "stage 10", "stage 60", "stage 80", "stage 100"]


def test_every_rule_has_its_own_name_and_codes():
    names = [rule.name for rule in RULES]
    assert len(set(names)) == len(names)
    declared = [code for rule in RULES for code in rule.codes] + list(CORE_CODES)
    assert len(set(declared)) == len(declared) == len(CODES)  # no code declared twice


def test_a_rule_gives_only_the_codes_it_declares():
    rule = RULES[0](None)
    with pytest.raises(ValueError, match="not declared by the rule"):
        rule.reason("ReclaimedFairShare", "a code of another rule")


class _Says(Rule):
    """A rule that says why a job waits (or nothing), and records that it was asked."""

    def __init__(self, name, code, asked):
        self.name, self.code, self.asked = name, code, asked

    def why_wait(self, job, judged):
        self.asked.append(self.name)
        return Reason(self.code, self.name) if self.code else None


def test_the_reasons_ask_the_rules_in_their_order():
    """The first rule that says why a job waits gives the reason; the rules after it are not asked."""
    asked = []
    rules = RuleSet([_Says("a", None, asked), _Says("b", "NoRuleApplies", asked), _Says("c", "Admitted", asked)])
    judged = SimpleNamespace(refused={}, unplaced=set())
    assert rules.wait_reason(Job("j", "q", 1), judged) == Reason("NoRuleApplies", "b")
    assert asked == ["a", "b"]


@pytest.mark.parametrize("name, stages", [
    ("preempt-inside-above-share-fraction", ["guarantees", "fair_share", "preemption_p20", "preemption_p10",
                                             "priority_p100", "preemption_inside_p20", "preemption_inside_p10",
                                             "starts", "moves", "packing"]),
    ("compose-reclaim-before-attach", ["guarantees", "fair_share", "preemption_p50", "starts", "attach", "moves",
                                       "packing"]),
])
def test_the_report_names_the_stages_in_the_order_of_their_ranks(name, stages):
    report = plan(load_scenario(SCENARIOS / f"{name}.yaml")).solver.stages
    assert [s["name"] for s in report] == stages
