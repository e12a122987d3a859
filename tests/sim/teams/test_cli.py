"""`gpu-policy simulate teams`: the tables, the JSON the issue asks for, the plot,
bad options, and a day of the real workload."""

import json
import os
import re
from pathlib import Path

import pytest

from gpu_policy.cli import main
from gpu_policy.errors import GpuPolicyError
from gpu_policy.sim.teams import Protocol, compare, load_team_trace

#: The philly-vc workload: $GPU_POLICY_PHILLY_DIR, else ../shared/data/philly-vc beside the checkout.
PHILLY = Path(os.environ.get("GPU_POLICY_PHILLY_DIR") or Path(__file__).resolve().parents[4] / "shared/data/philly-vc")

#: The fields the issue names, for the cluster and for each team.
POLICY_KEYS = {"utilization", "guarantee_share", "longest_below_guarantee_s", "teams_worse_than_static", "jain",
               "preemptions", "lost_gpu_hours", "lost_gpu_hours_split", "reclaim_wait_s", "mean_queueing_s",
               "p95_queueing_s", "mean_jct_s", "teams"}
TEAM_KEYS = {"utilization", "guarantee_share", "longest_below_guarantee_s", "worse_than_static", "preemptions",
             "lost_gpu_hours", "mean_queueing_s", "p95_queueing_s", "mean_jct_s"}


def simulate(trace_dir, *args) -> list[str]:
    return ["simulate", "teams", "--trace-dir", str(trace_dir), "--nodes", "2", "--days", "0-2",
            "--warmup-days", "0", *args]


def test_table_has_every_policy_and_the_per_team_delays(trace_dir, capsys):
    assert main(simulate(trace_dir)) == 0
    out = capsys.readouterr().out
    assert out.startswith("philly-vc: 2 nodes, 16 GPUs; days 0-2 after 0 days of warm-up, 5 jobs measured")
    for name in ("static", "fifo", "kai-like", "kai-time", "gpu-policy"):
        assert f"\n{name} " in out
    assert "gpu-policy-no-history" not in out  # without a half-life it is gpu-policy
    assert "mean queueing delay per team, hours (* worse than static)" in out
    assert "\na     8      3     " in out and "\nb     8      2     " in out
    assert ("saves take 20 s + 5 s per GPU, 50% of trainers save on request (seed 0); gpu-policy waits up to "
            "300 s for a victim's checkpoint; minimum runtime 0 s; no usage history") in out
    assert "LOST GPU-H  REDONE  RESTARTS  SAVING  RECLAIM WAIT P50 S  P95 S" in out
    assert "JAIN   ENTITLEMENT ERR MEAN  WORST  PREEMPT" in out
    assert "GPU-hours held beyond the quota, first week / second week (* borrowed heavily in the first" in out


def test_json_is_shaped_as_the_issue_says(trace_dir, tmp_path, capsys):
    plot = tmp_path / "teams.png"
    assert main(simulate(trace_dir, "--format", "json", "--checkpoint-every", "never", "--plot", str(plot))) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["protocol"]["checkpoint_every_s"] is None and data["quotas"] == {"a": 8, "b": 8}
    assert list(data["policies"]) == ["static", "fifo", "kai-like", "kai-time", "gpu-policy"]
    assert (data["protocol"]["usage_half_life_s"], data["protocol"]["usage_weight"]) == (None, 1.0)
    for name, p in data["policies"].items():
        assert POLICY_KEYS <= set(p)
        assert set(p["teams"]) == {"a", "b"} and all(TEAM_KEYS <= set(t) for t in p["teams"].values())
        assert p["jobs"] == 5 and 0 < p["utilization"] <= 1 and 0.5 <= p["jain"] <= 1
        assert isinstance(p["teams_worse_than_static"], list)
        split = p["lost_gpu_hours_split"]
        assert set(split) == {"redone", "restarts", "saving"}
        assert sum(split.values()) == pytest.approx(p["lost_gpu_hours"], abs=0.002)
        assert set(p["reclaim_wait_s"]) == {"p50", "p95"}
        assert set(p["entitlement_error"]) == {"mean", "worst"} and isinstance(p["borrowed_heavily"], dict)
        errors = [t["entitlement_error"] for t in p["teams"].values() if t["entitlement_error"] is not None]
        assert p["entitlement_error"]["worst"] == max(errors)
        assert p["entitlement_error"]["mean"] == pytest.approx(sum(errors) / len(errors), abs=1e-6)
        assert all(len(t["surplus_gpu_h_by_week"]) == 1 for t in p["teams"].values())  # two days: one week
    # b-1 asks 16 GPUs: more than b's quota, so static never starts it; everyone else runs it
    assert data["policies"]["static"]["unstarted"] == 1 and data["policies"]["fifo"]["unstarted"] == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_static_there_is_no_sharing_safety(trace_dir, capsys):
    assert main(simulate(trace_dir, "--format", "json", "--policies", "fifo,kai-like")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["policies"]["fifo"]["teams_worse_than_static"] is None
    assert data["policies"]["fifo"]["teams"]["a"]["worse_than_static"] is None


def test_the_trainers_and_gpu_policys_waits_are_part_of_the_protocol(trace_dir, capsys):
    args = ["--format", "json", "--save-s", "45", "--saves-on-request", "0.25", "--seed", "7",
            "--reclaim-wait", "0", "--min-runtime", "600", "--policies", "kai-like"]
    assert main(simulate(trace_dir, *args)) == 0
    protocol = json.loads(capsys.readouterr().out)["protocol"]
    assert {k: protocol[k] for k in ("save_s", "saves_on_request", "seed", "reclaim_wait_s", "min_runtime_s")} == \
        {"save_s": 45, "saves_on_request": 0.25, "seed": 7, "reclaim_wait_s": 0, "min_runtime_s": 600}


@pytest.mark.parametrize("setting, message", [
    ({"saves_on_request": 2.0}, "--saves-on-request: must be a share in 0..1, got 2"),
    ({"seed": -1}, "--seed: must be a whole number in 0..4294967295, got -1"),
    ({"save_s": -1.0}, "--save-s: must be seconds in 0..86400, got -1"),
    ({"reclaim_wait_s": 1e9}, "--reclaim-wait: must be seconds in 0..86400, got 1e+09"),
    ({"usage_half_life_s": 0.0}, "--usage-half-life: must be seconds in 1..3.16224e+08, got 0"),
    ({"usage_weight": float("nan")}, "--usage-weight: must be in 0..1000, got nan"),
])
def test_a_protocol_made_in_python_is_checked_too(setting, message, trace_dir):
    with pytest.raises(GpuPolicyError, match=re.escape(message)):
        compare(load_team_trace(trace_dir), ["fifo"], Protocol(nodes=2, days=(0, 2), warmup_days=0, **setting))


def test_with_a_half_life_gpu_policy_runs_with_history_and_without(trace_dir, capsys):
    args = ["--format", "json", "--usage-half-life", "86400", "--usage-weight", "2", "--policies",
            "kai-time,gpu-policy,gpu-policy-no-history"]
    assert main(simulate(trace_dir, *args)) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["protocol"]["usage_half_life_s"], data["protocol"]["usage_weight"]) == (86400, 2)
    assert list(data["policies"]) == ["kai-time", "gpu-policy", "gpu-policy-no-history"]
    assert Protocol(usage_half_life_s=86400).default_policies() == ["static", "fifo", "kai-like", "kai-time",
                                                                    "gpu-policy", "gpu-policy-no-history"]


def test_progress_counts_up_to_100_percent_over_all_runs(trace_dir):
    seen = []
    compare(load_team_trace(trace_dir), ["fifo", "kai-like"], Protocol(nodes=2, days=(0, 2), warmup_days=0),
            lambda done, total: seen.append((done, total)))
    assert seen[-1] == (100, 100) and (50, 100) in seen
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and {t for _, t in seen} == {100}


@pytest.mark.parametrize("args, message", [
    (["--days", "35-21"], "--days: must be a range FIRST-LAST of days with FIRST < LAST <= 3660, e.g. 21-35, "
                          "got '35-21'"),
    (["--days", "three"], "--days: must be a range FIRST-LAST of days with FIRST < LAST <= 3660, e.g. 21-35, "
                          "got 'three'"),
    (["--days", "0-99999999"], "--days: must be a range FIRST-LAST of days with FIRST < LAST <= 3660"),
    (["--warmup-days", "3"], "--warmup-days: must be in 0..0 (the first day of --days), got 3"),
    (["--checkpoint-every", "0"], "--checkpoint-every: must be seconds > 0 or 'never', got '0'"),
    (["--checkpoint-every", "sometimes"], "--checkpoint-every: must be seconds > 0 or 'never', got 'sometimes'"),
    (["--policies", "fifo,magic"], "--policies: must name policies of static, fifo, kai-like, kai-time, gpu-policy, "
                                   "gpu-policy-no-history, got 'magic'"),
    (["--policies", "fifo,fifo"], "--policies: must name each policy once, got 'fifo,fifo'"),
    (["--nodes", "0"], "--nodes: must be a whole number >= 1 and <= 100,000, got '0'"),
    (["--nodes", "1000000000"], "--nodes: must be a whole number >= 1 and <= 100,000, got '1000000000'"),
    (["--restart-cost", "-1"], "--restart-cost: must be a finite number >= 0 and <= 86,400, got '-1'"),
    (["--round-every", "0.001"], "--round-every: must be a finite number >= 1 and <= 86,400, got '0.001'"),
    (["--round-every", "nan"], "--round-every: must be a finite number >= 1 and <= 86,400, got 'nan'"),
    (["--save-s", "-1"], "--save-s: must be a finite number >= 0 and <= 86,400, got '-1'"),
    (["--saves-on-request", "1.5"], "--saves-on-request: must be a finite number >= 0 and <= 1, got '1.5'"),
    (["--seed", "0.5"], "--seed: must be a whole number >= 0 and <= 4,294,967,295, got '0.5'"),
    (["--reclaim-wait", "inf"], "--reclaim-wait: must be a finite number >= 0 and <= 86,400, got 'inf'"),
    (["--min-runtime", "-5"], "--min-runtime: must be a finite number >= 0 and <= 86,400, got '-5'"),
    (["--usage-half-life", "0"], "--usage-half-life: must be a finite number >= 1 and <= 316,224,000, got '0'"),
    (["--usage-half-life", "1e300"], "--usage-half-life: must be a finite number >= 1 and <= 316,224,000"),
    (["--usage-weight", "-1"], "--usage-weight: must be a finite number >= 0 and <= 1,000, got '-1'"),
])
def test_bad_options_exit_2_with_one_line(args, message, trace_dir, capsys):
    assert main(simulate(trace_dir, *args)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu-policy: {message}") and err.count("\n") == 1


@pytest.mark.skipif(not PHILLY.is_dir(), reason=f"the philly-vc workload is not at {PHILLY}: set GPU_POLICY_PHILLY_DIR")
def test_a_day_of_the_real_workload(capsys):
    """Day 21 after a week's warm-up on 96 nodes: every policy, the default protocol otherwise."""
    assert main(["simulate", "teams", "--trace-dir", str(PHILLY), "--days", "21-22", "--format", "json"]) == 0
    p = json.loads(capsys.readouterr().out)["policies"]
    assert {name: r["jobs"] for name, r in p.items()} == dict.fromkeys(p, 241)   # arrivals of day 21
    assert p["static"]["preemptions"] == p["fifo"]["preemptions"] == 0
    for name in ("kai-like", "gpu-policy"):
        assert p[name]["utilization"] >= p["fifo"]["utilization"] - 0.01 > p["static"]["utilization"]
        assert p[name]["guarantee_share"] >= 0.99 and p[name]["longest_below_guarantee_s"] <= 600
        assert p[name]["teams_worse_than_static"] == []
    assert p["gpu-policy"]["policy_stats"]["plans_at_time_limit"] == 0
