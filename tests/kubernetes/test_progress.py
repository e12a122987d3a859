"""Reading what "preemption that loses no work" plans with (docs/kubernetes.md, "Pods -> jobs",
"Policy -> policy"): how long a job has run or waited, its checkpoints from its pods'
annotations, the policy from the queues ConfigMap; bad values leave the pod out, naming the
field; `gpu-policy snapshot` writes them so a plan reproduces offline."""

import time

import pytest
import yaml

from gpu_policy import parse_scenario, plan
from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Policy, Queue, Scenario
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map, rfc3339

NOW = 1_800_000_000.0


@pytest.fixture
def base(api):
    api.put(node_object(Node(name="n", gpus=8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=4), Queue("team-b", deserved=4)],
                                       jobs=[], policy=Policy(reclaim_wait_s=300))))
    return api


def trainer_pod(name: str, node: str | None = "n", started: float | None = None, created: float = NOW - 3600,
                job: str | None = None, queue: str = "team-a", gpus: int = 2, **notes) -> dict:
    labels = {names.QUEUE_LABEL: queue, **({names.JOB_LABEL: job} if job else {})}
    pod = gpu_pod("ml", name, gpus=gpus, node=node, labels=labels,
                  annotations={names.PREFIX + k.replace("_", "-"): v for k, v in notes.items()})
    pod["metadata"]["creationTimestamp"] = rfc3339(created)
    if started is not None:
        pod["status"]["startTime"] = rfc3339(started)
    return pod


def observed(cluster):
    obs = cluster(clock=lambda: NOW).observe()
    return {j.name: j for j in obs.scenario.jobs}, obs


def test_a_gangs_run_and_checkpoints_are_its_least_favourable_replicas(base, cluster):
    base.put(trainer_pod("g-0", started=NOW - 900, job="g", checkpoint_every_s="1800", checkpoint_save_s="20.5",
                         saves_on_request="true", last_checkpoint=rfc3339(NOW - 100)))
    base.put(trainer_pod("g-1", started=NOW - 600, job="g", checkpoint_every_s="1200", checkpoint_save_s="42",
                         saves_on_request="true", last_checkpoint=rfc3339(NOW - 400)))
    base.put(trainer_pod("half", started=NOW - 50, job="h", saves_on_request="true"))
    base.put(trainer_pod("half-1", started=NOW - 50, job="h"))  # its trainer does not answer: the gang does not
    base.put(trainer_pod("waits", node=None, created=NOW - 75, queue="team-b"))
    jobs, obs = observed(cluster)
    g = jobs["ml/g"]
    assert (g.running_for_s, g.waiting_for_s, g.checkpoint_every_s, g.save_s, g.saves_on_request,
            g.checkpoint_age_s) == (600, None, 1200, 42, True, 400)
    assert not jobs["ml/h"].saves_on_request and jobs["ml/h"].save_s is None
    w = jobs["ml/waits"]
    assert (w.running_for_s, w.waiting_for_s, w.saves_on_request) == (None, 75, False)
    assert obs.scenario.policy == Policy(reclaim_wait_s=300)


def test_unknown_times_stay_unknown_and_clocks_behind_count_zero(base, cluster):
    base.put(trainer_pod("no-start"))  # bound, but the kubelet has not said when it started
    base.put(trainer_pod("ahead", started=NOW + 30, created=NOW + 60))
    jobs, _ = observed(cluster)
    assert jobs["ml/no-start"].running_for_s is None and jobs["ml/no-start"].checkpoint_every_s is None
    assert jobs["ml/ahead"].running_for_s == 0


def test_the_snapshot_writes_them_so_a_plan_reproduces_offline(base, kubeconfig, capsys):
    now = time.time()  # the command's own clock
    for name, age in (("due", 1650), ("fresh", 100)):
        base.put(trainer_pod(name, gpus=4, started=now - 5000, checkpoint_every_s="1800",
                             last_checkpoint=rfc3339(now - age)))
    base.put(trainer_pod("new", node=None, queue="team-b", gpus=4, created=now - 10))
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 0
    text = capsys.readouterr().out
    written = yaml.safe_load(text)
    assert written["policy"]["reclaim_wait_s"] == 300
    due = next(j for j in written["jobs"] if j["name"] == "ml/due")
    assert due["checkpoint_every_s"] == 1800 and due["running_for_s"] >= 5000 and due["checkpoint_age_s"] >= 1650
    got = plan(parse_scenario(written, "snapshot"))
    assert {d.name: d.action for d in got.jobs}["ml/due"] == "preempt"  # at its checkpoint, as on the cluster
    assert got.job("ml/due").evict_after_s is not None


@pytest.mark.parametrize("notes,field,problem", [
    ({"checkpoint_every_s": "half an hour"}, "checkpoint-every-s", 'must be a number of seconds, got "half an hour"'),
    ({"checkpoint_every_s": "0"}, "checkpoint-every-s", "must be > 0, got 0.0"),
    ({"checkpoint_save_s": "-3"}, "checkpoint-save-s", "must be >= 0, got -3.0"),
    ({"checkpoint_save_s": "nan"}, "checkpoint-save-s", "must be a number, got nan"),
    ({"saves_on_request": "yes"}, "saves-on-request", 'must be "true" or "false", got "yes"'),
    ({"checkpoint_requested": "yesterday"}, "checkpoint-requested", "must be an RFC 3339 time"),
])
def test_a_bad_value_names_the_field_and_a_running_pod_still_holds_its_gpus(base, cluster, notes, field, problem):
    """A pod not on a node yet is left out; one running holds its GPUs whatever else it says:
    counted as unmanaged (never touched), with the same field named."""
    base.put(trainer_pod("fine"))
    base.put(trainer_pod("odd", node=None, **notes))
    base.put(trainer_pod("runs", **notes))
    jobs, obs = observed(cluster)
    assert sorted(jobs) == ["ml/fine", "ml/runs"] and jobs["ml/runs"].queue == names.UNMANAGED_QUEUE
    assert jobs["ml/runs"].running == ["n"] and jobs["ml/runs"].gpus == 2
    (warning,) = obs.object_warnings
    assert (warning.object, warning.field) == ("pod ml/odd", f"metadata.annotations.gpu-policy.io/{field}")
    assert problem in warning.line()
    (line,) = [w for w in obs.warnings if w.startswith("pod ml/runs ")]
    assert f"metadata.annotations.gpu-policy.io/{field}: " in line and problem in line and "counted as unmanaged" in line


def test_a_bad_start_time_or_grace_period_counts_a_running_pod_as_unmanaged(base, cluster):
    late = trainer_pod("late")
    late["status"]["startTime"] = "soon"
    graceless = trainer_pod("graceless")
    graceless["spec"]["terminationGracePeriodSeconds"] = -1
    base.put(late)
    base.put(graceless)
    jobs, obs = observed(cluster)
    assert obs.object_warnings == [] and {j.queue for j in jobs.values()} == {names.UNMANAGED_QUEUE}
    assert sorted(w.partition(": counted")[0] for w in obs.warnings if "counted as unmanaged" in w) == [
        'pod ml/graceless spec.terminationGracePeriodSeconds: must be a whole number of seconds >= 0, got -1',
        'pod ml/late status.startTime: must be an RFC 3339 time in UTC such as 2026-01-31T12:00:00Z, got "soon"']


@pytest.mark.parametrize("text,message", [
    ("reclaim_wait_s: -5", "data.policy.yaml.reclaim_wait_s: must be >= 0, got -5"),
    ("reclaim_wait: 60", "data.policy.yaml.reclaim_wait: unknown field (did you mean reclaim_wait_s? allowed: "
                         "reclaim_wait_s,"),
    ("[300]", "data.policy.yaml: must be a mapping, got list"),
])
def test_a_bad_policy_is_bad_input(base, kubeconfig, capsys, text, message):
    config_map = base.get("configmaps", names.QUEUES_CONFIGMAP, names.DEFAULT_NAMESPACE)
    config_map["data"][names.POLICY_KEY] = text
    base.put(config_map)
    assert main(["plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert f"ConfigMap gpu-policy/gpu-policy-queues: {message}" in err
