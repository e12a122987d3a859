"""Reason codes: every decision but keep carries one from `CODES`, and docs/scenario.md lists exactly `CODES`."""

import re
from pathlib import Path

from gpu_policy import load_scenario, plan
from gpu_policy.planner.codes import CODES
from gpu_policy.presentation.render import plan_table
from tests.conftest import scenario_files

ROOT = Path(__file__).parent.parent.parent


def test_docs_list_every_code_and_no_other():
    page = (ROOT / "docs" / "scenario.md").read_text()
    section = page.split("### Reason codes", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert sorted(listed) == sorted(CODES)
    assert len(listed) == len(set(listed))


def test_every_code_the_source_writes_is_listed():
    """A reason is made with a literal code (`Reason("X", ...)` or a rule's `reason("X", ...)`,
    which also refuses a code its rule does not declare): each such code is one of `CODES`."""
    written = set()
    for path in (ROOT / "gpu_policy").rglob("*.py"):
        written |= set(re.findall(r'(?:Reason|reason)\(\s*"(\w+)"', path.read_text()))
    assert written and written <= set(CODES), sorted(written - set(CODES))


def test_every_decision_of_every_scenario_has_a_listed_code():
    seen = set()
    for path in scenario_files():
        for d in plan(load_scenario(path)).jobs:
            if d.action == "keep":
                assert d.code == "" and d.reason == ""
            else:
                assert d.code in CODES, (path.name, d.name, d.code)
                seen.add(d.code)
                if d.action in ("wait", "preempt", "move"):
                    assert d.reason, (path.name, d.name)
    # the scenarios reach the common codes of each action (a guard that codes are really set)
    assert {"Admitted", "FragmentedNoBlock", "QueueAboveLimit", "NoNodeFits", "ReclaimedFairShare",
            "ReclaimedGuarantee", "PreemptedInsideQueue", "MovedToDefragment", "WaitingForComposition"} <= seen


def test_the_table_and_json_carry_the_code():
    p = plan(load_scenario(ROOT / "tests" / "scenarios" / "limit.yaml"))
    waiting = [d for d in p.jobs if d.action == "wait"]
    assert waiting and all(d.code == "QueueAboveLimit" for d in waiting)
    assert all(row["code"] == d.code for row, d in zip(p.to_dict()["jobs"], p.jobs))
    table = plan_table(p)
    assert table.splitlines()[0].split()[:6] == ["JOB", "QUEUE", "ACTION", "WHERE", "CODE", "REASON"]
    assert all(any(d.name in line and d.code in line for line in table.splitlines()) for d in waiting)
