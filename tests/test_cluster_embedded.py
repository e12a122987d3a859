"""The embedded cluster as a cluster: the registry, acting on it, and `gpu-policy apply` on a file."""

import pytest
import yaml

from gpu_policy import Job, load_scenario
from gpu_policy.cli import main
from gpu_policy.cluster import ScenarioCluster, open_cluster, register_source, registry
from gpu_policy.actions.cycle import apply_plan_once, wait_for_step
from gpu_policy.cluster.registry import _registry
from tests.conftest import SCENARIOS

SEED1 = SCENARIOS / "seed1-greedy-team.yaml"


def test_the_name_picks_the_backend():
    assert isinstance(open_cluster(str(SEED1)), ScenarioCluster)
    assert isinstance(open_cluster(f"file://{SEED1}"), ScenarioCluster)
    assert registry["k8s"]["class"] == "gpu_policy.kubernetes.cluster.KubernetesCluster"
    with pytest.raises(ValueError, match="cluster scheme 'file' is already served by"):
        register_source("file", ScenarioCluster)
    with pytest.raises(TypeError):
        registry["x"] = {}  # read-only


def test_a_third_backend_is_one_registered_class():
    class Mine(ScenarioCluster):
        @classmethod
        def from_url(cls, url):
            return cls(str(SEED1))

    register_source("mine", Mine)
    try:
        assert open_cluster("mine://anything").observe().scenario.jobs[0].name == "a-1"
    finally:
        _registry.pop("mine")


def test_acting_on_the_embedded_cluster_changes_it_in_memory_only(tmp_path):
    cluster = ScenarioCluster(str(SEED1), apply_to=tmp_path / "after.yaml")
    plan, outcomes = apply_plan_once(cluster)  # a dry run by default
    assert [(o.job, o.result) for o in outcomes] == [("a-5", "dry run"), ("a-6", "dry run")]
    assert not (tmp_path / "after.yaml").exists()
    plan, outcomes = apply_plan_once(cluster, execute=True)
    after = yaml.safe_load((tmp_path / "after.yaml").read_text())
    assert {j["name"]: bool(j.get("running")) for j in after["jobs"]}["a-5"] is False
    again, _ = apply_plan_once(cluster)
    assert again.summary["preemptions"] == 0 and again.summary["starts"] == 0  # the plan happened
    assert load_scenario(SEED1).jobs[4].running == ["node-3"]  # the file itself is unchanged


def test_the_embedded_cluster_carries_the_topology(tmp_path):
    """The levels and the jobs' requests survive a plan carried out: the written file plans the same."""
    cluster = ScenarioCluster(str(SCENARIOS / "topology-move-frees-rack.yaml"), apply_to=tmp_path / "after.yaml")
    plan, _ = apply_plan_once(cluster, execute=True)
    assert plan.job("gang").action == "start"
    after = load_scenario(tmp_path / "after.yaml")
    assert after.topology == cluster.scenario.topology and after.topology[0].name == "rack"
    gang = next(j for j in after.jobs if j.name == "gang")
    assert gang.topology.required == "rack" and sorted(gang.running) == ["n1", "n2"]


def test_an_executed_step_runs_on_the_embedded_cluster():
    cluster = ScenarioCluster(str(SCENARIOS.parent.parent / "gpu_policy" / "examples" / "training-cluster.yaml"))
    first = wait_for_step(cluster, Job("step", "team-a", 2), execute=True)
    second = wait_for_step(cluster, Job("step", "team-a", 2), execute=True)
    assert first.can_start and second.plan.job("step").action == "keep" and second.nodes == first.nodes


def test_apply_command_on_a_file(tmp_path, capsys):
    out = tmp_path / "after.yaml"
    assert main(["apply", "--cluster", str(SEED1), "--execute", "--apply-to", str(out)]) == 0
    assert "preempt a-5: done" in capsys.readouterr().out and out.exists()
    assert main(["apply", "--cluster", str(SEED1), "--execute"]) == 2
    assert capsys.readouterr().err == (f"gpu-policy: apply --execute on a scenario file needs --apply-to OUT.yaml "
                                       f"({SEED1} itself is never changed)\n")


@pytest.mark.parametrize("command", [["apply", "--execute", "--apply-to", "after.yaml"], ["reconcile", "--rounds", "1"]])
def test_release_on_a_file_is_refused_in_one_line(command, capsys):
    """A scenario file has no gated pods: `--release` names what only a live cluster has."""
    assert main([command[0], "--cluster", str(SEED1), "--release", *command[1:]]) == 2
    assert capsys.readouterr().err == (f"gpu-policy: --release: applies to k8s:// clusters only (gated pods), "
                                       f"not to {SEED1}\n")
