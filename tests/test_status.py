"""`status`: the queue tree, pending GPUs by reason code, waiting jobs in start order, and --watch."""

import json

from gpu_policy import load_scenario, plan
from gpu_policy.cli import build_parser, main
from gpu_policy.cli.status import CLEAR, run
from gpu_policy.presentation.status import cluster_status, status_text
from tests.conftest import scenario_files

SCENARIOS = scenario_files()[0].parent
T = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def test_departments_come_before_their_queues_and_sum_their_pending_codes():
    s = load_scenario(SCENARIOS / "departments.yaml")
    result = plan(s)
    st = cluster_status(s, result, T)
    names = [(q.name, q.depth) for q in st.queues]
    assert names == [("dept-x", 0), ("x1", 1), ("x2", 1), ("dept-y", 0), ("y1", 1)]
    waits = [d for d in result.jobs if d.action == "wait"]
    by_code = {}
    for d in waits:
        by_code[d.code] = by_code.get(d.code, 0) + next(j.total_gpus for j in s.jobs if j.name == d.name)
    q = {x.name: x for x in st.queues}
    assert q["y1"].pending_by_code == by_code == q["dept-y"].pending_by_code
    assert q["dept-x"].pending_by_code == {}
    assert st.plan_time == "2027-01-15T08:00:00Z"
    assert st.actions == {k: result.summary[k] for k in ("starts", "preemptions", "moves", "waiting")}
    assert [c["job"] for c in st.changes] == [d.name for d in result.jobs if d.action == "start"]


def test_waiting_jobs_in_start_order_and_never_fitting_ones_last():
    s = load_scenario(SCENARIOS / "never-fits.yaml")
    st = cluster_status(s, plan(s), T)
    assert {w.code for w in st.waiting[-3:]} == {"NoNodeFits"}
    s = load_scenario(SCENARIOS / "relative-share-tiebreak.yaml")
    st = cluster_status(s, plan(s), T)
    started = [w.action for w in st.waiting]
    assert started == sorted(started, key=lambda a: a != "start")  # the plan starts a prefix of the order


def test_borrowed_is_allocation_beyond_fair_share():
    s = load_scenario(SCENARIOS / "seed1-greedy-team.yaml")
    st = cluster_status(s, plan(s), T)
    for q in st.queues:
        assert q.borrowed == max(0, q.allocated - q.fair_share)
    assert any(q.borrowed > 0 for q in st.queues)
    text = status_text(st)
    assert text.splitlines()[0].split()[:3] == ["QUEUE", "DESERVED", "LIMIT"] and "BORROWED" in text


def test_cli_json(capsys):
    assert main(["status", "--cluster", str(SCENARIOS / "limit.yaml"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["queues"][0]["pending_by_code"] == {"QueueAboveLimit": 1}
    assert [w["name"] for w in data["waiting"]][-1] == "a-4"


def test_watch_refreshes_in_place_without_sleeping(capsys):
    args = build_parser().parse_args(["status", "--cluster", str(SCENARIOS / "limit.yaml"), "--watch", "5"])
    slept, times = [], iter([T, T + 5])
    assert run(args, clock=lambda: next(times), sleep=slept.append, rounds=2) == 0
    out = capsys.readouterr().out
    assert out.count(CLEAR) == 2 and slept == [5.0]
    assert "plan at 2027-01-15T08:00:00Z" in out and "plan at 2027-01-15T08:00:05Z" in out


def test_a_bad_watch_period_is_a_usage_error(capsys):
    assert main(["status", "--cluster", str(SCENARIOS / "limit.yaml"), "--watch", "0"]) == 2
    assert "--watch" in capsys.readouterr().err
