"""Loading the philly-vc CSVs, the quotas scaled to a cluster, and one clear line
for each kind of bad input."""

import pytest

from gpu_policy.cli import main
from gpu_policy.errors import TraceError
from gpu_policy.sim.teams import load_team_trace
from gpu_policy.sim.teams import trace as trace_module
from tests.sim.teams.conftest import JOBS, TEAMS, job, write_trace


def test_loads_jobs_by_arrival_and_teams_in_file_order(trace_dir):
    trace = load_team_trace(trace_dir)
    assert [j.name for j in trace.jobs] == ["a-0", "a-1", "a-2", "b-0", "b-1"]
    assert [t.name for t in trace.teams] == ["a", "b"]
    assert trace.jobs[2].gpus == 8 and trace.jobs[2].duration_s == 3600.0
    assert [j.name for j in trace.between(600, 86_400)] == ["a-2"]


@pytest.mark.parametrize("gpus, replicas, per_replica, held", [
    (1, 1, 1, 1), (7, 1, 7, 7), (8, 1, 8, 8), (12, 2, 8, 16), (16, 2, 8, 16), (20, 3, 8, 24), (64, 8, 8, 64),
])
def test_jobs_above_a_node_are_gangs_of_whole_nodes(gpus, replicas, per_replica, held):
    j = job("j", "a", 0, gpus, 1)
    assert (j.replicas, j.gpus_per_replica, j.held_gpus) == (replicas, per_replica, held)


def test_quotas_scale_shares_with_largest_remainders(tmp_path):
    teams = "vc,nodes,gpus\nx,32,256\ny,8,64\nz,16,128\nw,0,0\n"
    trace = load_team_trace(write_trace(tmp_path, JOBS.replace(",a,", ",x,").replace(",b,", ",y,"), teams))
    # 56 nodes of shares on 100 GPUs: 57.14, 14.29, 28.57 -> 57, 14, 29 (the largest remainder gets the unit)
    assert trace.quotas(100) == {"x": 57, "y": 14, "z": 29, "w": 0}
    assert sum(trace.quotas(768).values()) == 768


def test_the_real_shares_on_96_nodes():
    """The quotas docs/simulate.md lists for the default protocol, from vcs.csv's
    nodes: 352 nodes scaled to 768 GPUs."""
    teams = ("vc,nodes,gpus\n0e4a51,32,256\n103959,8,64\n11cb48,16,128\n23dbec,0,0\n2869ce,16,128\n51b7ef,0,0\n"
             "6214e9,64,512\n6c71a0,32,256\n795a4c,0,0\n7f04ca,32,256\n925e2b,0,0\nb436b2,64,512\ne13805,16,128\n"
             "ed69ec,8,64\nee9e8c,64,512\n")
    trace = trace_module.TeamTrace([], [trace_module.Team(n.split(",")[0], int(n.split(",")[1]))
                                        for n in teams.splitlines()[1:]], "x")
    quotas = trace.quotas(768)
    assert quotas["6214e9"] == quotas["b436b2"] == 140 and quotas["ee9e8c"] == 139   # 139.6 each: one gets less
    assert quotas["103959"] == quotas["ed69ec"] == 17 and quotas["0e4a51"] == 70
    assert quotas["23dbec"] == 0 and sum(quotas.values()) == 768


HEADER = "job,vc,arrival_s,gpus,duration_s,model\n"
BAD = {
    "no folder": (None, TEAMS, r"nope: not a folder \(expected the philly-vc CSVs"),
    "missing column": (JOBS.replace("duration_s", "runtime"), TEAMS, r"jobs.csv: header: missing column 'duration_s' \(needs job, vc"),
    "no rows": (HEADER, TEAMS, r"jobs.csv: no rows"),
    "not a number": (HEADER + "j,a,soon,1,10,m\n", TEAMS, r"jobs.csv: line 2: arrival_s: must be a number, got 'soon'"),
    "not finite": (HEADER + "j,a,0,1,inf,m\n", TEAMS, r"jobs.csv: line 2: duration_s: must be a number, got 'inf'"),
    "negative arrival": (HEADER + "j,a,-5,1,10,m\n", TEAMS, r"line 2: arrival_s: must be >= 0, got '-5'"),
    "fractional gpus": (HEADER + "j,a,0,1.5,10,m\n", TEAMS, r"line 2: gpus: must be a whole number, got '1.5'"),
    "zero gpus": (HEADER + "j,a,0,0,10,m\n", TEAMS, r"line 2: gpus: must be from 1 to 65,536, got '0'"),
    "huge gpus": (HEADER + "j,a,0,1e12,10,m\n", TEAMS, r"line 2: gpus: must be from 1 to 65,536, got '1e12'"),
    "zero duration": (HEADER + "j,a,0,1,0,m\n", TEAMS, r"line 2: duration_s: must be > 0, got '0'"),
    "unknown team": (HEADER + "j,a,0,1,10,m\nk,zz,0,1,10,m\n", TEAMS,
                     r"jobs.csv: line 3: vc: must be a team of vcs.csv, got 'zz'"),
    "duplicate job": (HEADER + "j,a,0,1,10,m\nj,b,0,1,10,m\n", TEAMS, r"line 3: job: duplicate name 'j'"),
    "empty name": (HEADER + ",a,0,1,10,m\n", TEAMS, r"line 2: job: must not be empty"),
    "duplicate team": (JOBS, TEAMS + "a,2,16\n", r"vcs.csv: line 4: vc: duplicate team 'a'"),
    "negative share": (JOBS, "vc,nodes,gpus\na,-1,8\nb,1,8\n", r"vcs.csv: line 2: nodes: must be >= 0, got '-1'"),
    "team file missing column": (JOBS, "vc,gpus\na,8\n", r"vcs.csv: header: missing column 'nodes'"),
    "not text": (HEADER + "j,a,0,1,10,\xff\n", TEAMS, r"jobs.csv: .*UTF-8"),
    "a NUL byte": (HEADER + "j,a,0\x00,1,10,m\n", TEAMS, r"jobs.csv: line 2: arrival_s: must be a number"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_trace_is_one_line_and_exit_2(case, tmp_path, capsys):
    jobs, teams, message = BAD[case]
    if jobs is None:
        folder = tmp_path / "nope"
    else:
        folder = tmp_path / "t"
        folder.mkdir()
        (folder / "jobs.csv").write_bytes(jobs.encode("utf-8").replace(b"\xc3\xbf", b"\xff"))
        (folder / "vcs.csv").write_text(teams)
    with pytest.raises(TraceError, match=message):
        load_team_trace(folder)
    assert main(["simulate", "teams", "--trace-dir", str(folder), "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("gpu-policy: ")


def test_a_file_past_the_row_limit_is_refused_early(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_ROWS", 3)
    rows = HEADER + "".join(f"j{i},a,0,1,10,m\n" for i in range(10))
    with pytest.raises(TraceError, match=r"jobs.csv: line 5: must have at most 3 rows"):
        load_team_trace(write_trace(tmp_path, rows))


def test_too_many_teams_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_TEAMS", 2)
    with pytest.raises(TraceError, match=r"vcs.csv: line 4: must have at most 2 rows"):
        load_team_trace(write_trace(tmp_path, JOBS, TEAMS + "c,1,8\n"))


def test_a_huge_field_is_an_error_not_a_crash(tmp_path):
    rows = HEADER + "j,a,0,1,10," + "x" * 200_000 + "\n"
    with pytest.raises(TraceError, match=r"jobs.csv: line 2: not valid CSV: field larger than field limit"):
        load_team_trace(write_trace(tmp_path, rows))
