"""The program is built by a loop over the rules (gpu_policy.planner.rules.protocol): each
rule's rows in the rules' order, then every stage in the one declared order of families."""

from types import SimpleNamespace

import pulp
import pytest

from gpu_policy import load_scenario, plan
from gpu_policy.planner.linear import affine
from gpu_policy.planner.program import PlanProgram
from gpu_policy.planner.rules.order import RULES
from gpu_policy.planner.rules.protocol import STAGE_ORDER, RuleBase, Stage, build
from tests.conftest import SCENARIOS


class _Rule(RuleBase):
    """A rule that records when its rows run and declares stages of the given families."""

    def __init__(self, name, families, calls):
        self.name, self.families, self.calls = name, families, calls

    def rows(self, ctx):
        self.calls.append(f"rows {self.name}")

    def stages(self, ctx):
        return [Stage(family, self._stage(ctx, family)) for family in self.families]

    def _stage(self, ctx, family):
        def made():
            self.calls.append(f"stage {family}")
            if family == "moves":  # nothing to decide: left out
                return [(family, affine({}))]
            return [(f"{family}_{self.name}", affine({ctx.m.var(family, 0, 1): 1}))]
        return made


def test_rows_in_rule_order_then_stages_in_the_declared_order():
    calls = []
    ctx = SimpleNamespace(m=PlanProgram(pulp.LpProblem("p", pulp.LpMinimize)))
    build(ctx, [_Rule("late", ["packing", "moves", "starts"], calls), _Rule("early", ["guarantees"], calls)])
    assert [name for name, _ in ctx.m.stages] == ["guarantees_early", "starts_late", "packing_late"]
    assert calls == ["rows late", "rows early", "stage guarantees", "stage starts", "stage moves", "stage packing"]


def test_a_stage_of_no_declared_family_is_refused():
    with pytest.raises(ValueError, match="not in STAGE_ORDER"):
        Stage("bonus", list)


def test_every_rule_has_its_own_name():
    names = [rule.name for rule in RULES]
    assert len(set(names)) == len(names) and "composition" not in names  # composition is one per plan


def _family(stage: str) -> str:
    for family in sorted(STAGE_ORDER, key=len, reverse=True):  # preemption_inside before preemption
        if stage == family or stage.startswith(family + "_"):
            return family
    raise AssertionError(f"stage {stage} has no family")


@pytest.mark.parametrize("name, stages", [
    ("preempt-inside-above-share-fraction", ["guarantees", "fair_share", "preemption_p20", "preemption_p10",
                                             "priority_p100", "preemption_inside_p20", "preemption_inside_p10",
                                             "starts", "moves", "packing"]),
    ("compose-reclaim-before-attach", ["guarantees", "fair_share", "preemption_p50", "starts", "attach", "moves",
                                       "packing"]),
])
def test_the_report_names_the_stages_in_the_declared_order(name, stages):
    report = plan(load_scenario(SCENARIOS / f"{name}.yaml")).solver.stages
    assert [s["name"] for s in report] == stages
    order = [STAGE_ORDER.index(_family(s)) for s in stages]
    assert order == sorted(order)
