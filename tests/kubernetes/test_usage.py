"""The usage ConfigMap `gpu-policy-usage`: what the leader writes reads back; one that is missing,
unreadable or from the future is a warning naming it and the field, and an empty history; the
one-shot commands read it as it is, decayed to now, and never write it."""

import json

import pytest
import yaml

from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.clocks import stamp
from gpu_policy.kubernetes.read.usage import CLOCK_SKEW_S, read_usage
from gpu_policy.kubernetes.write.usage import usage_data
from gpu_policy.model.usage import UsageHistory
from tests.kubernetes.controller_harness import cluster_of
from tests.kubernetes.objects import gpu_pod, usage_config_map

NOW = 1_800_000_000.0
HOUR = 3600.0
CONFIG_MAPS = f"/api/v1/namespaces/{names.DEFAULT_NAMESPACE}/configmaps"
WHERE = f"ConfigMap {names.DEFAULT_NAMESPACE}/{names.USAGE_CONFIGMAP}"


def config_map(text: str) -> dict:
    return {"metadata": {"name": names.USAGE_CONFIGMAP, "namespace": names.DEFAULT_NAMESPACE},
            "data": {names.USAGE_KEY: text}}


def test_what_the_leader_writes_reads_back_decayed_from_its_time():
    written = UsageHistory(NOW, HOUR, {"a": 123.456789, "b": 0.5})
    data = usage_data(written)
    assert yaml.safe_load(data[names.USAGE_KEY]) == {"a": {"gpu_h": 123.456789, "at": stamp(NOW)},
                                                     "b": {"gpu_h": 0.5, "at": stamp(NOW)}}
    read = read_usage({"data": data}, NOW + HOUR, HOUR, names.DEFAULT_NAMESPACE)
    assert read.problem is None and read.history.at == NOW + HOUR
    assert read.history.gpu_h == pytest.approx({"a": 123.456789 / 2, "b": 0.25})


def test_an_empty_history_reads_as_one():
    read = read_usage(config_map(""), NOW, HOUR, names.DEFAULT_NAMESPACE)
    assert read.problem is None and read.history.gpu_h == {}


AT = stamp(NOW)


@pytest.mark.parametrize("text, field, problem", [
    ("a: [1, 2", "data.usage.yaml", "line"),
    ("[a, b]", "data.usage.yaml", "must be a mapping {queue: {gpu_h, at}}"),
    (f"a: {{gpu_h: -1, at: '{AT}'}}", "data.usage.yaml.a.gpu_h", "must be >= 0, got -1"),
    (f"a: {{gpu_h: lots, at: '{AT}'}}", "data.usage.yaml.a.gpu_h", "lots"),
    (f"a: {{gpu_h: 1e13, at: '{AT}'}}", "data.usage.yaml.a.gpu_h", "at most"),
    ("a: {gpu_h: 5}", "data.usage.yaml.a", "must be a mapping {gpu_h, at}"),
    ("a: 5", "data.usage.yaml.a", "must be a mapping {gpu_h, at}"),
    (f"7: {{gpu_h: 5, at: '{AT}'}}", "data.usage.yaml.7", "must be a non-empty string"),
    ("a: {gpu_h: 5, at: yesterday}", "data.usage.yaml.a.at", "must be an RFC 3339 time in UTC"),
    ("a: {gpu_h: 5, at: '2027-01-15T08:00:00'}", "data.usage.yaml.a.at", "must be an RFC 3339 time in UTC"),
    # what Python's ISO 8601 reader takes and RFC 3339 UTC does not: an offset, no seconds, the basic form
    ("a: {gpu_h: 5, at: '2027-01-15T09:00:00+01:00'}", "data.usage.yaml.a.at", "must be an RFC 3339 time in UTC"),
    ("a: {gpu_h: 5, at: '2027-01-15T08:00Z'}", "data.usage.yaml.a.at", "must be an RFC 3339 time in UTC"),
    ("a: {gpu_h: 5, at: '20270115T080000Z'}", "data.usage.yaml.a.at", "must be an RFC 3339 time in UTC"),
    (f"a: {{gpu_h: 5, at: '{stamp(NOW + CLOCK_SKEW_S + 1)}'}}", "data.usage.yaml.a.at", "is in the future"),
    ("a: {gpu_h: 5, at: '" + "x" * (1 << 20) + "'}", "data.usage.yaml", "larger than 1 MB"),
])
def test_an_unreadable_history_is_an_empty_one_and_a_problem_naming_the_field(text, field, problem):
    read = read_usage(config_map(text), NOW, HOUR, names.DEFAULT_NAMESPACE)
    assert read.history.gpu_h == {} and read.history.at == NOW
    assert read.problem.startswith(f"{WHERE}: {field}: ") and problem in read.problem
    assert read.problem.endswith("planned with an empty usage history, which the leader's next write replaces")


def test_a_history_without_its_key_and_a_missing_one_are_problems_too():
    read = read_usage({"data": {}}, NOW, HOUR, names.DEFAULT_NAMESPACE)
    assert read.history.gpu_h == {} and read.problem.startswith(f"{WHERE}: data.usage.yaml: is required")
    missing = read_usage(None, NOW, HOUR, names.DEFAULT_NAMESPACE)
    assert missing.history.gpu_h == {} and missing.problem.startswith(f"{WHERE} does not exist")


def test_a_writer_whose_clock_runs_a_little_ahead_is_read_as_now():
    read = read_usage(config_map(f"a: {{gpu_h: 5, at: '{stamp(NOW + CLOCK_SKEW_S)}'}}"), NOW, HOUR, "gpu-policy")
    assert read.problem is None and read.history.gpu_h == {"a": 5}


# -- the one-shot commands -------------------------------------------------------------------------
WEEK = 604_800


def usage_cluster(api, usage: dict | None, policy: dict | None = None, written_ago_s: float = 0.0,
                  **queue_fields) -> None:
    """Two queues of 8 GPUs' demand each on 16 GPUs, and their usage history as the leader wrote it
    `written_ago_s` ago (of the fake API server's real clock)."""
    import time

    cluster_of(api, nodes=2, gpus=8,
               queues=[{"name": "a", "deserved": 0, **queue_fields}, {"name": "b", "deserved": 0}],
               policy={"usage_half_life_s": WEEK} if policy is None else policy)
    for queue in ("a", "b"):
        for i in range(16):
            api.put(gpu_pod("jobs", f"{queue}-{i}", 1, labels={names.QUEUE_LABEL: queue}))
    if usage is not None:
        api.put(usage_config_map(usage, time.time() - written_ago_s))


def run_json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def config_map_writes(api) -> int:
    """Writes of any of gpu-policy's ConfigMaps."""
    return sum(1 for r in api.requests if r.method != "GET" and r.path.startswith(CONFIG_MAPS))


def test_plan_and_snapshot_carry_the_history_decayed_to_now_and_never_write_it(api, kubeconfig, capsys):
    # written a half-life ago: now a used 60% of the 16 GPUs' decayed hours and b 20%
    usage_cluster(api, {"a": 2 * 2327.0, "b": 2 * 776.0}, written_ago_s=WEEK)
    cluster = ["--cluster", "k8s://", "--kubeconfig", kubeconfig]
    plan = run_json(capsys, "plan", *cluster, "--format", "json")
    queues = {q["name"]: q for q in plan["queues"]}
    assert queues["a"]["usage_gpu_h"] == pytest.approx(2327, abs=0.01)
    assert queues["b"]["usage_gpu_h"] == pytest.approx(776, abs=0.01)
    assert (queues["a"]["fair_share"], queues["b"]["fair_share"]) == (5, 11)  # a used more: it gets less
    assert (queues["a"]["fair_share_without_usage"], queues["b"]["fair_share_without_usage"]) == (8, 8)
    assert not [w for w in plan["warnings"] if "usage" in w]
    snapshot = run_json(capsys, "snapshot", *cluster, "--format", "json")
    assert {q["name"]: q.get("usage_gpu_h") for q in snapshot["queues"]} == \
           {"a": pytest.approx(2327, abs=0.01), "b": pytest.approx(776, abs=0.01)}
    assert config_map_writes(api) == 0 and api.calls(f"{CONFIG_MAPS}/{names.USAGE_CONFIGMAP}", "GET") == 2


def test_without_a_half_life_the_history_is_not_even_read(api, kubeconfig, capsys):
    usage_cluster(api, {"a": 2327.0}, policy={})
    plan = run_json(capsys, "plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--format", "json")
    assert all(q["usage_gpu_h"] is None for q in plan["queues"]) and not [w for w in plan["warnings"] if "usage" in w]
    assert api.calls(f"{CONFIG_MAPS}/{names.USAGE_CONFIGMAP}") == 0


@pytest.mark.parametrize("usage_text, said", [
    (None, f"{WHERE} does not exist: no usage history yet"),
    ("a: {gpu_h: -3, at: '2026-01-01T00:00:00Z'}", f"{WHERE}: data.usage.yaml.a.gpu_h: must be >= 0, got -3"),
])
def test_a_missing_or_corrupt_history_is_a_warning_and_an_empty_one(api, kubeconfig, capsys, usage_text, said):
    usage_cluster(api, None)
    if usage_text is not None:
        api.put({"kind": "ConfigMap", **config_map(usage_text)})
    plan = run_json(capsys, "plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--format", "json")
    assert any(w.startswith(said) for w in plan["warnings"])
    assert {q["name"]: (q["usage_gpu_h"], q["fair_share"]) for q in plan["queues"]} == {"a": (0, 8), "b": (0, 8)}
    assert config_map_writes(api) == 0


def test_usage_in_the_queues_config_map_is_ignored_with_a_warning(api, kubeconfig, capsys):
    usage_cluster(api, {"b": 10.0}, usage_gpu_h=5000)
    plan = run_json(capsys, "plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--format", "json")
    assert ("ConfigMap gpu-policy/gpu-policy-queues: data.queues.yaml: queue a: usage_gpu_h: ignored: on a cluster, "
            "usage is the ConfigMap gpu-policy/gpu-policy-usage's, which the controller keeps") in plan["warnings"]
    assert {q["name"]: q["usage_gpu_h"] for q in plan["queues"]} == {"a": 0, "b": pytest.approx(10, abs=0.001)}

