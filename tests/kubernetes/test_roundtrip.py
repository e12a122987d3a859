"""Every tests/scenarios file -> the fake cluster -> `gpu-policy snapshot` -> the same
scenario, and `gpu-policy plan --cluster` decides as `gpu-policy plan FILE`."""

import json
import time

import pytest

from gpu_policy import load_scenario, parse_scenario, plan
from gpu_policy.cli import main
from gpu_policy.errors import ScenarioError
from gpu_policy.kubernetes import KubernetesCluster
from gpu_policy.model import Job, Node, Queue, Scenario
from gpu_policy.model.scenario_dump import scenario_to_dict
from gpu_policy.model.scenario_file import check_built
from gpu_policy.telemetry import SimulatedDcgmSource, TelemetrySettings, cluster_signals
from tests.conftest import scenario_files
from tests.kubernetes.objects import load_into

NAMESPACE = "jobs"


def run(capsys, *argv) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


#: the job fields a cluster gives as times the snapshot reads some time after they were written
AGES = ("checkpoint_age_s", "running_for_s", "waiting_for_s")


def comparable(scenario, waiting: set[str] = frozenset()) -> tuple[dict, dict, dict]:
    """The scenario as data, job names without the namespace, jobs by name; each job's ages
    apart (read some time after they were written: compared with `ages_agree`); and each
    queue's usage apart (decayed since it was written: `usage_agrees`). A job whose time
    waiting the file gives (`waiting`) is created that long ago: its `submitted_at` is that
    time, not the file's."""
    data = scenario_to_dict(scenario)
    usage = {q["name"]: q.pop("usage_gpu_h", 0) for q in data["queues"]}
    ages = {}
    for job in data["jobs"]:
        job["name"] = job["name"].removeprefix(f"{NAMESPACE}/")
        ages[job["name"]] = {k: job.pop(k, None) for k in AGES}
        if job["name"] in waiting:
            job.pop("submitted_at", None)
    data["jobs"].sort(key=lambda j: j["name"])
    return {k: data.get(k) for k in ("nodes", "queues", "jobs", "composable", "namespaces", "policy",
                                     "topology")}, ages, usage


def ages_agree(read: dict, written: dict, elapsed: float) -> bool:
    """Ages read `elapsed` seconds after they were written are as old as written, give or take
    that time and a second and a half: a stamp is written cut to the second (up to 1 s older)
    and a look rounds an age to whole seconds (up to 0.5 s more). A cluster knows how long
    every waiting job has waited (its pods' creation), where a file may not say."""
    def agree(field: str, got, want) -> bool:
        if want is None:
            return got is None or field == "waiting_for_s"
        return got is not None and abs(got - want) <= elapsed + 1.5

    return read.keys() == written.keys() and all(
        agree(field, read[job][field], written[job][field]) for job in written for field in AGES)


def usage_agrees(read: dict, written: dict, elapsed: float, half_life_s: float | None) -> bool:
    """Usage read `elapsed` seconds after it was written is what was written, decayed by at most
    that time (to the thousandth, as a snapshot holds it). A cluster keeps usage only with a
    half-life: without one, a look reads none (the planner would not count it)."""
    if half_life_s is None:
        return all(v == 0 for v in read.values())
    most_decayed = 2 ** (-(elapsed + 1) / half_life_s)
    return read.keys() == written.keys() and all(
        written[q] * most_decayed - 0.0005 <= read[q] <= written[q] + 0.0005 for q in written)


def decisions(result: dict) -> dict:
    return {j["name"].removeprefix(f"{NAMESPACE}/"): (j["action"], [(r["node"], r["gpu_indices"]) for r in j["replicas"]])
            for j in result["jobs"]}


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_round_trip(api, kubeconfig, path, capsys):
    original = load_scenario(path)
    written = time.time()
    load_into(api, original, written, NAMESPACE)
    built = KubernetesCluster("k8s://", kubeconfig=kubeconfig).observe().scenario
    # the mapping builds its scenario without writing it out and reading it back: what it builds
    # is already what a file of it reads as
    assert parse_scenario(scenario_to_dict(built), built.source) == built
    cluster = ["--cluster", "k8s://", "--kubeconfig", kubeconfig]
    snapshot = parse_scenario(run(capsys, "snapshot", *cluster, "--format", "json"), "snapshot")
    waiting = {j.name for j in original.jobs if j.waiting_for_s is not None}
    (read, read_ages, read_usage), (want, want_ages, want_usage) = comparable(snapshot, waiting), \
        comparable(original, waiting)
    elapsed = time.time() - written
    assert read == want and ages_agree(read_ages, want_ages, elapsed)
    assert usage_agrees(read_usage, want_usage, elapsed, original.policy.usage_half_life_s)

    got = run(capsys, "plan", *cluster, "--format", "json")
    calls = 7 if original.composable else 5  # nodes, pods, ResourceSlices (a 404), 2 ConfigMaps; composable: its
    # ConfigMap and one LIST of requests more
    calls += any(q.namespace_selector for q in original.queues)  # namespaces listed only for a selector's labels
    calls += original.policy.usage_half_life_s is not None  # the usage ConfigMap, read only when usage is kept
    assert got["observed"]["source"] == "k8s://" and got["observed"]["api_calls"] == calls
    if original.telemetry or original.composable:
        # `plan FILE` simulates DCGM (the file's profiles; the idle GPUs composition may detach), which no
        # cluster object carries: plan both with the same readings
        settings = TelemetrySettings()
        readings = SimulatedDcgmSource(original).collect(settings)
        got = plan(snapshot, signals=cluster_signals(readings, snapshot, settings)).to_dict()
        want = plan(original, signals=cluster_signals(readings, original, settings)).to_dict()
    else:
        want = run(capsys, "plan", str(path), "--format", "json")
    assert decisions(got) == decisions(want)
    assert got["summary"] == want["summary"]
    assert [(q["name"], q["fair_share"], q["allocated_after"]) for q in got["queues"]] == \
           [(q["name"], q["fair_share"], q["allocated_after"]) for q in want["queues"]]


@pytest.mark.parametrize("scenario, line", [
    (Scenario(nodes=[Node("n1", gpus=2000)], queues=[], jobs=[]), "x: nodes[0].gpus: must be at most 1,024"),
    (Scenario(nodes=[Node("n1", gpus=8, labels={"a": ["b"]})], queues=[], jobs=[]),
     "x: nodes[0].labels: must be a mapping of label names to values"),
    (Scenario(nodes=[Node("n1", gpus=8), Node("n1", gpus=8)], queues=[], jobs=[]), "x: nodes[1].name: duplicate name"),
    (Scenario(nodes=[Node("n1", gpus=8)], queues=[Queue("q")], jobs=[Job("j", "q", 4, running=["n2"])]),
     "x: jobs[0] (name: j).running[0]: unknown node"),
    (Scenario(nodes=[Node("n1", gpus=8)], queues=[Queue("q")], jobs=[Job("j", "q", 1.5)]),
     "x: jobs[0] (name: j).gpus: a fraction of a GPU must be below 1"),
    (Scenario(nodes=[Node("n1", gpus=8)], queues=[Queue("q")], jobs=[Job("j", "gone", 1)]),
     "x: jobs[0] (name: j).queue: unknown queue"),
])
def test_a_built_scenario_is_checked_as_a_file_is(scenario, line):
    """The checks a file's scenario passes hold for the one the mapping builds (check_built)."""
    scenario.source = "x"
    with pytest.raises(ScenarioError) as e:
        check_built(scenario)
    assert str(e.value).startswith(line)
    with pytest.raises(ScenarioError) as parsed:
        parse_scenario(scenario_to_dict(scenario), "x")
    assert str(parsed.value).split(":")[:2] == str(e.value).split(":")[:2]  # the same field as a file's
