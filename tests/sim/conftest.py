"""A small openb-format trace written to a temporary folder, and where the real one is."""

import os
from pathlib import Path

import pytest

#: The openb trace: $GPU_POLICY_OPENB_DIR, else ../shared/data/openb beside the checkout.
OPENB = Path(os.environ.get("GPU_POLICY_OPENB_DIR") or Path(__file__).resolve().parents[3] / "shared/data/openb")

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,8,G2
n1,64000,262144,8,G2
n2,32000,131072,4,T4
n3,16000,65536,2,T4
n4,32000,131072,0,
"""

PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,8000,16384,1,1000,,LS,Running,0,10,0
p1,4000,8192,1,500,,LS,Running,0,10,0
p2,4000,8192,1,250,,BE,Running,0,10,0
p3,16000,32768,4,1000,,LS,Running,0,10,0
p4,2000,4096,0,0,,BE,Running,0,10,0
p5,8000,16384,1,810,,LS,Running,0,10,0
p6,4000,8192,1,1000,T4,LS,Running,0,10,0
p7,32000,65536,8,1000,,LS,Running,0,10,0
"""


#: One big G2 node and two small T4 nodes: for GPU-model constraints.
G2_AND_TWO_T4 = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,8,G2
n1,32000,131072,2,T4
n2,32000,131072,2,T4
"""


def write_trace(folder, nodes=NODES, pods=PODS):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "openb_node_list_all_node.csv").write_bytes(nodes.encode("utf-8", "surrogateescape"))
    (folder / "openb_pod_list_default.csv").write_bytes(pods.encode("utf-8", "surrogateescape"))
    return folder


@pytest.fixture
def trace_dir(tmp_path):
    return write_trace(tmp_path / "trace")
