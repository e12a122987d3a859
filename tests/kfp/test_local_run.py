"""The example pipeline end to end with kfp.local's SubprocessRunner on the embedded cluster.

The components are the shipped ones, built for the image: they install nothing, so they run
in this environment, which has gpu-policy and kfp as the image does. kfp.local warns that an
image without "python" in its name may not be a Python image; gpu-policy's is one.
"""

import json
import sys
from pathlib import Path

import pytest

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from kfp import local  # noqa: E402

from gpu_policy.checkpoint import CheckpointStore  # noqa: E402
from gpu_policy.checkpoint.example import example_step, initial_state  # noqa: E402
from gpu_policy.kfp import components  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from pipelines.gpu_aware_training import EXAMPLE_CLUSTER, build_pipeline  # noqa: E402


pytestmark = pytest.mark.filterwarnings("ignore:You may be attemping to run a task that uses custom:RuntimeWarning")


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path_factory.mktemp("root")))
    return build_pipeline(components(), rounds=3)


def test_rounds_resume_from_checkpoints(pipeline, tmp_path):
    ckpt = tmp_path / "ckpt"
    pipeline(checkpoint_uri=str(ckpt), total_steps=30, steps_per_round=10)
    store = CheckpointStore(str(ckpt))
    assert [c.step for c in store.list()] == [10, 20, 30]  # grows each round, no step twice
    trained = store.load(store.latest())
    state = initial_state()
    for k in range(30):
        state = example_step(state, k)
    assert trained["w"].tobytes() == state["w"].tobytes() and trained["b"] == state["b"]


def test_no_gpus_no_training(pipeline, tmp_path):
    full = json.loads(EXAMPLE_CLUSTER)
    full["queues"][1]["deserved"] = 16  # team-b holds no more than it deserves: nothing to reclaim
    full["jobs"].append({"name": "b-big", "queue": "team-b", "gpus": 8, "running": ["gpu-node-2"]})
    full["jobs"].append({"name": "b-more", "queue": "team-b", "gpus": 4, "running": ["gpu-node-1"]})
    ckpt = tmp_path / "ckpt"
    # the cluster is full and team-b holds only what it deserves: the plan says not yet
    pipeline(scenario_yaml=json.dumps(full), checkpoint_uri=str(ckpt), total_steps=30, steps_per_round=10,
             max_wait_s=0.2, poll_interval_s=0.1)
    assert CheckpointStore(str(ckpt)).list() == []
