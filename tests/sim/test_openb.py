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


def test_minimal_pod_columns_load(tmp_path):
    """The publisher's pod lists differ in columns: only name, cpu_milli, memory_mib,
    num_gpu and gpu_milli are needed; without gpu_spec every pod may use any model."""
    minimal = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,8000,16384,1,1000\np1,4000,8192,1,500\n" \
              "p2,2000,4096,0,0\np3,16000,32768,4,1000\n"
    _, pods = load_trace(write_trace(tmp_path, pods=minimal))
    assert [(t.gpus, t.milli, t.spec) for t in pods.types] == [(1, 1000, None), (1, 500, None), (0, 0, None),
                                                              (4, 1000, None)]


def test_fractional_resources_round_and_whole_counts_accept_a_point_zero(tmp_path):
    rows = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1500.6,100.2,2.0,1000\n"
    _, pods = load_trace(write_trace(tmp_path, pods=rows))
    assert (pods.types[0].cpu, pods.types[0].memory, pods.types[0].gpus) == (1501, 100, 2)


HEADER = PODS.splitlines()[0]
BAD = {
    "no folder": (None, None, r"nope: not a folder"),
    "missing column": (NODES.replace("cpu_milli,", "cpus,"), PODS,
                       r"openb_node_list_all_node.csv: header: missing column 'cpu_milli'"),
    "missing pod column": (NODES, PODS.replace("num_gpu,", "gpus,"),
                           r"openb_pod_list_default.csv: header: missing column 'num_gpu' \(needs name, cpu_milli"),
    "column twice": (NODES, PODS.replace("qos,", "name,"), r"header: column 'name' appears twice"),
    "not a number": (NODES.replace("n2,32000", "n2,lots"), PODS,
                     r"openb_node_list_all_node.csv: line 4: cpu_milli: must be a number, got 'lots'"),
    "negative": (NODES.replace("n3,16000", "n3,-1"), PODS, r"line 5: cpu_milli: must be from 0 to 1,000,000,000, got '-1'"),
    "too many gpus": (NODES.replace(",2,T4", ",9,T4"), PODS, r"line 5: gpu: must be from 0 to 8, got '9'"),
    "gpus without model": (NODES.replace(",2,T4", ",2,"), PODS, r"line 5: model: a node with GPUs needs its GPU model"),
    "share out of range": (NODES, PODS.replace("p1,4000,8192,1,500", "p1,4000,8192,1,1500"),
                           r"openb_pod_list_default.csv: line 3: gpu_milli: must be from 0 to 1,000, got '1500'"),
    "share of zero": (NODES, PODS.replace("p1,4000,8192,1,500", "p1,4000,8192,1,0"),
                      r"line 3: gpu_milli: must be from 1 to 1000 for one GPU, got 0"),
    "no pods": (NODES, HEADER + "\n", r"openb_pod_list_default.csv: no rows"),
    "no gpus at all": ("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1000,0,\n", PODS, r"gpu: no node has GPUs"),
    # issue 17's reproducers
    "inf": (NODES, PODS.replace("p0,8000,", "p0,inf,"), r"line 2: cpu_milli: must be a number, got 'inf'"),
    "1e400": (NODES, PODS.replace("p0,8000,", "p0,1e400,"), r"line 2: cpu_milli: must be a number, got '1e400'"),
    "1.5 GPUs": (NODES, PODS.replace("p3,16000,32768,4,", "p3,16000,32768,1.5,"),
                 r"line 5: num_gpu: must be a whole number, got '1.5'"),
    "huge field": (NODES, PODS.replace("p0,", "p" + "x" * 200_000 + ","), r"line 2: not valid CSV: field larger"),
    "unbalanced quote": (NODES, PODS.replace("p2,", '"p2,'), r"openb_pod_list_default.csv: line \d+: not valid CSV"),
    "no pod asks a GPU": (NODES, HEADER + "\np0,1000,1000,0,0,,BE,Running,0,1,0\n",
                          r"num_gpu: no pod asks for a GPU"),
    "not UTF-8": (NODES, PODS.replace("p4", "p\udcff4"), r"openb_pod_list_default.csv: line 6: is not UTF-8 text: byte 0xff"),
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
