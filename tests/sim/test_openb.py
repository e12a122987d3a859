"""Loading the openb CSVs, and one clear line for each kind of bad input."""

import pytest

from gpu_policy.cli import main
from gpu_policy.errors import TraceError
from gpu_policy.sim.openb import load_trace
from tests.sim.conftest import NODES, PODS, write_trace


def test_loads_nodes_and_pod_types(trace_dir):
    nodes, pods = load_trace(trace_dir)
    assert nodes.names == ["n0", "n1", "n2", "n3", "n4"]
    assert nodes.gpu_capacity == 22
    assert nodes.models == ["G2", "T4"]
    assert list(nodes.model) == [0, 0, 1, 1, -1]
    assert len(pods.types) == 8 and list(pods.counts) == [1] * 8
    share = pods.types[1]
    assert (share.gpus, share.milli, share.gpu_milli) == (1, 500, 500)
    assert pods.types[3].gpu_milli == 4000
    assert pods.types[6].spec == frozenset({"T4"})


def test_identical_pods_share_a_type(tmp_path):
    rows = PODS + "p8,8000,16384,1,1000,,BE,Failed,0,10,0\n"
    _, pods = load_trace(write_trace(tmp_path, pods=rows))
    assert len(pods.types) == 8 and pods.counts[0] == 2


BAD = {
    "no folder": (None, None, r"nope: not a folder"),
    "missing column": (NODES.replace("cpu_milli,", "cpus,"), PODS,
                       r"openb_node_list_all_node.csv: header: missing column 'cpu_milli'"),
    "not a number": (NODES.replace("n2,32000", "n2,lots"), PODS,
                     r"openb_node_list_all_node.csv: line 4: cpu_milli: expected a number, got 'lots'"),
    "negative": (NODES.replace("n3,16000", "n3,-1"), PODS, r"line 5: cpu_milli: must be >= 0, got -1"),
    "too many gpus": (NODES.replace(",2,T4", ",9,T4"), PODS, r"line 5: gpu: at most 8 per node, got 9"),
    "gpus without model": (NODES.replace(",2,T4", ",2,"), PODS, r"line 5: model: a node with GPUs needs its GPU model"),
    "share out of range": (NODES, PODS.replace("p1,4000,8192,1,500", "p1,4000,8192,1,1500"),
                           r"openb_pod_list_default.csv: line 3: gpu_milli: must be in 1..1000 for one GPU, got 1500"),
    "no pods": (NODES, PODS.splitlines()[0] + "\n", r"openb_pod_list_default.csv: no rows"),
    "no gpus at all": ("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1000,0,\n", PODS, r"gpu: no node has GPUs"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_trace_is_one_line_and_exit_2(case, tmp_path, capsys):
    nodes, pods, message = BAD[case]
    folder = tmp_path / "nope" if nodes is None else write_trace(tmp_path / "t", nodes, pods)
    with pytest.raises(TraceError, match=message):
        load_trace(folder)
    assert main(["simulate", "openb", "--trace-dir", str(folder), "--seeds", "0", "--policies", "fgd"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("gpu-policy: ")
