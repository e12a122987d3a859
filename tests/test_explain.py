"""`explain`: every waiting job of every scenario gets a change the planner confirms starts it."""

import json

import pytest

from gpu_policy import load_scenario, plan
from gpu_policy.cli import main
from gpu_policy.presentation.explain import explain
from tests.conftest import scenario_files

WAITING = [(path, d.name) for path in scenario_files() for d in plan(load_scenario(path)).jobs if d.action == "wait"]


def test_the_scenarios_have_waiting_jobs_of_many_kinds():
    codes = {plan(load_scenario(p)).job(name).code for p, name in WAITING}
    assert len(WAITING) >= 40 and len(codes) >= 6


@pytest.mark.parametrize("path,name", WAITING, ids=[f"{p.stem}:{n}" for p, n in WAITING])
def test_every_change_found_starts_the_job(path, name):
    s = load_scenario(path)
    e = explain(s, name)
    assert e.action == "wait" and e.code and e.reason
    assert e.changes, f"no change found for {name} ({e.code}: {e.reason})"
    assert e.plans <= 40
    for change in e.changes:
        assert plan(change.scenario).job(name).action == "start", change.text
        assert change.scenario is not s and change.scenario.expect is None


def test_the_change_is_the_smallest_of_its_kind(write_scenario):
    s = load_scenario(write_scenario("""
nodes: [{name: n1, gpus: 8}]
queues: [{name: a, limit: 4}]
jobs:
- {name: a-run, queue: a, gpus: 3, running: [n1]}
- {name: a-wants, queue: a, gpus: 3}
"""))
    e = explain(s, "a-wants")
    assert e.code == "QueueAboveLimit"
    limit = next(c for c in e.changes if c.kind == "limit")
    assert limit.size == 6 and "from 4 to 6" in limit.text
    assert not any(c.kind == "free_gpus" for c in e.changes)  # free GPUs do not lift a limit
    # one less is not enough: the search stops at the smallest size the planner confirms
    lower = [q if q.name != "a" else type(q)(**{**q.__dict__, "limit": 5}) for q in s.queues]
    assert plan(type(s)(**{**s.__dict__, "queues": lower, "expect": None})).job("a-wants").action == "wait"
    leaves = next(c for c in e.changes if c.kind == "job_leaves")
    assert "a-run" in leaves.text and "finishes" in leaves.text


def test_position_in_its_queue(write_scenario):
    s = load_scenario(write_scenario("""
nodes: [{name: n1, gpus: 2}]
queues: [{name: a}, {name: b}]
jobs:
- {name: a-run, queue: a, gpus: 2, running: [n1]}
- {name: a-1, queue: a, gpus: 1, submitted_at: 1}
- {name: a-2, queue: a, gpus: 1, submitted_at: 2}
- {name: a-hi, queue: a, gpus: 1, priority: 60, submitted_at: 3}
"""))
    assert (explain(s, "a-2").position, explain(s, "a-2").queue_waiting) == (3, 3)
    assert explain(s, "a-hi").position == 1


def test_a_running_job_says_what_would_preempt_it(write_scenario):
    s = load_scenario(write_scenario("""
nodes: [{name: n1, gpus: 4}]
queues: [{name: a, deserved: 2}, {name: b, deserved: 2}]
jobs:
- {name: a-big, queue: a, gpus: 4, running: [n1]}
- {name: a-svc, queue: a, gpus: 0.5, priority: 200}
"""))
    e = explain(s, "a-big")
    assert e.action == "keep" and e.runs_on == "n1[0,1,2,3]" and "above its fair share" not in e.reason
    claims = {c.text.split(" if ")[1].split()[0]: c for c in e.changes}
    assert set(claims) == {"a", "b"}
    for c in e.changes:
        assert plan(c.scenario).job("a-big").action in ("preempt", "move"), c.text


def test_a_non_preemptible_job_is_never_stopped(write_scenario, capsys):
    path = write_scenario("""
nodes: [{name: n1, gpus: 4}]
queues: [{name: a, deserved: 4}, {name: b}]
jobs: [{name: svc, queue: a, gpus: 4, priority: 200, running: [n1]}]
""")
    assert main(["explain", "svc", "--cluster", str(path)]) == 0
    out = capsys.readouterr().out
    assert "non-preemptible" in out and "nothing: it is non-preemptible" in out


def test_cli_json_and_an_unknown_job(capsys):
    path = str(scenario_files()[0].parent / "limit.yaml")
    assert main(["explain", "a-4", "--cluster", path, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["code"] == "QueueAboveLimit" and data["changes"][0]["kind"] == "limit"
    assert main(["explain", "no-such-job", "--cluster", path]) == 2
    assert capsys.readouterr().err.strip() == f"gpu-policy: explain: no job 'no-such-job' in {path}"


def test_progress_goes_to_stderr_only_when_slow(capsys):
    from gpu_policy.cli import build_parser
    from gpu_policy.cli.explain import run

    path = str(scenario_files()[0].parent / "limit.yaml")
    args = build_parser().parse_args(["explain", "a-4", "--cluster", path])
    ticks = iter(range(0, 1000, 5))  # every look at the clock is 5 s later
    assert run(args, clock=lambda: next(ticks)) == 0
    assert "explain: plan 1 of at most 40" in capsys.readouterr().err
    assert run(args, clock=lambda: 0.0) == 0
    assert capsys.readouterr().err == ""


def test_a_delayed_job_is_told_when_time_lets_it_start():
    """A job its queue's preemption delay holds back: explain names the seconds left, and the
    scenario it planned to confirm them has every known wait grown by them."""
    s = load_scenario(next(p for p in scenario_files() if p.name == "preemption-delay.yaml"))
    out = explain(s, "b-eager")
    assert out.code == "PreemptionDelay"
    time = next(c for c in out.changes if c.kind == "time")
    assert time.size == 240 and next(j for j in time.scenario.jobs if j.name == "b-eager").waiting_for_s == 300
