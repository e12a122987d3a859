"""What a pipeline step gets from a plan (gpu_policy.actions.step) and its training budget."""

from pathlib import Path

import pytest

from gpu_policy import Job, load_scenario
from gpu_policy.checkpoint import CheckpointStore
from gpu_policy.checkpoint.budget import resolve, run_step_budget
from gpu_policy.cli import main
from gpu_policy.cluster import ScenarioCluster
from gpu_policy.actions.cycle import wait_for_step
from gpu_policy.errors import ScenarioError
from gpu_policy.actions.step import HOSTNAME_LABEL, decide_step
from tests.conftest import SCENARIOS

SEED3 = SCENARIOS / "seed3-idle-borrow.yaml"
EXAMPLE = Path(__file__).resolve().parents[1] / "gpu_policy" / "examples" / "training-cluster.yaml"


def test_a_step_that_fits_gets_its_node():
    d = decide_step(load_scenario(EXAMPLE), Job(name="train", queue="team-a", gpus=2))
    assert d.can_start and d.gpu_count == 2 and len(d.nodes) == 1
    terms = d.node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": d.nodes}]}]
    assert d.node_selector == {HOSTNAME_LABEL: d.nodes[0]}
    assert d.plan.job("train").action == "start"


def test_a_step_that_waits_says_why():
    d = decide_step(load_scenario(SEED3), Job(name="train", queue="team-a", gpus=8, submitted_at=99))
    assert not d.can_start and d.node_affinity == {} and "largest free block" in d.reason


def test_unknown_queue():
    with pytest.raises(ScenarioError, match="seed3-idle-borrow.yaml: queue: 'nope' is not a queue of the cluster"):
        decide_step(load_scenario(SEED3), Job(name="train", queue="nope", gpus=1))


SEED1 = SCENARIOS / "seed1-greedy-team.yaml"


def test_a_step_named_as_another_job_is_refused(capsys):
    """b-3 is a 5-GPU team-b job: a team-a step of 2 GPUs of that name is refused, not planned as b-3."""
    with pytest.raises(ScenarioError, match=r"seed1-greedy-team.yaml: jobs\[\d+\] \(name: b-3\): the step's job has "
                                            r"this name but is another job: the cluster's runs for team-b with 5 GPUs, "
                                            r"the step asks for team-a with 2 GPUs"):
        decide_step(load_scenario(SEED1), Job(name="b-3", queue="team-a", gpus=2))
    assert main(["step", "--cluster", str(SEED1), "--job", "b-3", "--queue", "team-a", "--gpus", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "(name: b-3)" in err


def test_a_step_named_as_itself_is_planned_as_itself():
    """The same job observed again (after its reservation) is the step, planned once."""
    d = decide_step(load_scenario(SEED1), Job(name="b-3", queue="team-b", gpus=5))
    assert d.gpu_count == 5 and d.pod_labels["gpu-policy.io/queue"] == "team-b"
    assert sum(j.name == "b-3" for j in d.plan.jobs) == 1


def test_wait_is_bounded():
    now, sleeps = [0.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    d = wait_for_step(ScenarioCluster(SEED3), Job(name="t", queue="team-a", gpus=8), max_wait_s=100,
                      poll_interval_s=30, clock=lambda: now[0], sleep=sleep)
    assert not d.can_start and d.attempts == 4 and sleeps == [30, 30, 30]


def test_budget_resumes(tmp_path):
    ref = ("gpu_policy.checkpoint.example:example_step", "gpu_policy.checkpoint.example:initial_state")
    first = run_step_budget(str(tmp_path), 25, 10, *ref)
    second = run_step_budget(str(tmp_path), 25, 10, *ref)
    third = run_step_budget(str(tmp_path), 25, 10, *ref)
    assert [(s.first_step, s.last_step) for s in (first, second, third)] == [(0, 10), (10, 20), (20, 25)]
    assert CheckpointStore(str(tmp_path)).latest().step == 25


def test_resolve_errors():
    with pytest.raises(ValueError, match="step_function: must be 'module:function'"):
        resolve("no_colon", "step_function")
    with pytest.raises(ValueError, match="init_function: cannot load 'gpu_policy:nope'"):
        resolve("gpu_policy:nope", "init_function")
