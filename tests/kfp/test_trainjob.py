"""run_trainjob in a KFP pipeline run with kfp.local, through the real kubernetes 30.x client,
against the fake API server with the stand-in Kubeflow Trainer and gpu-policy's real controller
(tests/kubernetes/live_cluster.py): a TrainJob of 4 nodes x 8 GPUs is created with gpu-policy's
runtime patch, its 4 pods are gated by the admission policy, admitted together onto the 4 free
nodes, and the run ends with the TrainJob."""

import pytest

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from kfp import dsl, local  # noqa: E402

from gpu_policy.kfp import run_trainjob  # noqa: E402
from gpu_policy.kubernetes import names  # noqa: E402
from tests.kubernetes.fake_api import FakeKubernetes  # noqa: E402
from tests.kubernetes.live_cluster import LiveCluster  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:You may be attemping to run a task that uses custom:RuntimeWarning")

TRAIN_JOB = {"metadata": {"name": "llm-pretrain"},
             "spec": {"runtimeRef": {"name": "torch-distributed"},
                      "trainer": {"image": "registry.example.com/ml/trainer:1.0", "command": ["torchrun", "train.py"]}}}


@pytest.fixture
def live(tmp_path, monkeypatch):
    """The live cluster, named by $KUBECONFIG's current context (namespace ml), which the
    component's subprocess inherits."""
    with FakeKubernetes() as api:
        config = api.kubeconfig(tmp_path / "kubeconfig", contexts=("fake",), namespace="ml")
        monkeypatch.setenv("KUBECONFIG", config)
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        with LiveCluster(api, config, namespace="ml") as cluster:
            yield cluster


@dsl.pipeline(name="train-job-when-admitted")
def train_job_when_admitted(nodes: int = 4):
    run_trainjob(trainjob_manifest=TRAIN_JOB, job_name="llm-pretrain", queue="a", num_nodes=nodes, gpus_per_node=8,
                 max_wait_s=120.0, poll_interval_s=0.2, run_timeout_s=120.0)


def test_a_pipeline_s_train_job_is_admitted_as_one_gang_and_ends_with_it(live, tmp_path, capfd):
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"))
    train_job_when_admitted(nodes=4)
    live.stop()
    job = live.trainer.train_job("ml", "llm-pretrain")
    assert [c["type"] for c in job["status"]["conditions"]] == ["Complete"]
    pods = {p["metadata"]["name"]: p for p in live.trainer.pods("ml", "llm-pretrain")}
    assert len(pods) == 4 and live.released_together(set(pods))
    assert sorted(live.releases[-1][name] for name in pods) == ["n1", "n2", "n3", "n4"]  # each onto a free node
    assert all(p["status"]["phase"] == "Succeeded" and p["metadata"]["labels"][names.QUEUE_LABEL] == "a"
               for p in pods.values())
    printed = capfd.readouterr().out
    assert "TrainJob ml/llm-pretrain: 4 pods released onto n" in printed
    assert "TrainJob ml/llm-pretrain: Complete (AllJobsCompleted: jobset completed successfully)" in printed


@pytest.fixture
def quiet(tmp_path, monkeypatch):
    """The fake API server with the trainer and no controller: nothing is admitted."""
    from tests.kubernetes.fake_trainer import FakeTrainer

    with FakeKubernetes() as api:
        api.add_resource("events.k8s.io", "v1", "events", "Event", True)
        FakeTrainer(api)
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(tmp_path / "kubeconfig", contexts=("fake",), namespace="ml"))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        yield api


def test_a_train_job_not_admitted_in_time_fails_with_where_it_stands_and_stays(quiet):
    with pytest.raises(SystemExit, match=r"^gpu-policy: TrainJob ml/llm-pretrain: \d of its 2 pods exist, waiting for "
                                         r"the rest: not admitted within 0 s$"):
        run_trainjob.python_func(trainjob_manifest=TRAIN_JOB, job_name="llm-pretrain", queue="a", num_nodes=2,
                                 max_wait_s=0.0)
    (job,) = quiet.objects("trainjobs", "ml", group="trainer.kubeflow.org")
    assert job["spec"]["trainer"]["numNodes"] == 2  # it stays queued: a retry of the task waits for it


def test_a_bad_manifest_fails_in_one_line_before_any_request(quiet):
    with pytest.raises(SystemExit, match=r"^gpu-policy: TrainJob manifest: metadata.name: must be a DNS label"):
        run_trainjob.python_func(trainjob_manifest={**TRAIN_JOB, "metadata": {"name": "LLM"}}, job_name="llm",
                                 queue="a")
    assert quiet.requests == []
