"""`gpu-policy simulate topology` from the command line."""

import json

import pytest

from gpu_policy.cli import main

SMALL = ["simulate", "topology", "--blocks", "2", "--racks-per-block", "2", "--nodes-per-rack", "4", "--jobs", "30"]


def test_table_names_every_policy_and_seed(capsys):
    assert main(SMALL + ["--seeds", "0-1"]) == 0
    out = capsys.readouterr().out
    for policy in ("gpu-policy", "best-fit", "topology-blind"):
        assert f"{policy} seed 0" in out and f"{policy} seed 1" in out and f"{policy} (mean)" in out
    assert "ALLOC % AT 1ST REQUIRED WAIT" in out


def test_json_and_plot(tmp_path, capsys):
    plot = tmp_path / "topology.png"
    assert main(SMALL + ["--seeds", "3", "--policies", "best-fit,topology-blind", "--format", "json",
                         "--plot", str(plot)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in data["runs"]] == ["best-fit", "topology-blind"]
    assert data["runs"][0]["jobs"] == 30 and data["shape"]["nodes_per_rack"] == 4
    assert set(data["means"]) == {"best-fit", "topology-blind"}
    assert data["means"]["best-fit"]["required_broken"] == 0
    assert plot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("args, message", [
    (["--blocks", "0"], "--blocks"),
    (["--gpus", "x"], "--gpus"),
    (["--load", "0"], "--load"),
    (["--seeds", "4-1"], "--seeds"),
    (["--policies", "gpu-policy,kueue"], "--policies: unknown policy kueue"),
    (["--blocks", "100", "--racks-per-block", "100", "--nodes-per-rack", "100"], "at most 10,000 nodes"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert main(["simulate", "topology"] + args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
