"""One actuator for every caller (issue 41): the controller's round and a one-shot
`apply --execute --release` send the same writes for the same cluster, a one-shot command
leaves gated pods alone unless asked, and a dry run writes nothing."""

import json
import time

from gpu_policy.cli import main
from gpu_policy.controller import Controller, ControllerSettings
from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings, names
from tests.kubernetes.controller_harness import cluster_of, gated_pod, released, sees
from tests.kubernetes.fake_api import FakeKubernetes
from tests.kubernetes.objects import rfc3339
from tests.kubernetes.test_act import eviction_cluster

WRITES = ("POST", "PATCH", "PUT", "DELETE")
LEASE = "/apis/coordination.k8s.io/"


def gated_cluster(api) -> None:
    """4 nodes x 8 GPUs: a gang of 2 to release, one pod over its queue's limit, one larger
    than any node, a gang still missing a pod, one pod gpu-policy cannot read, two to release.
    Every pod created in the same second (a waiting job's age, and so the start order, comes
    from its creationTimestamp: pods stamped by the server as they come could straddle a second
    and start in another order)."""
    cluster_of(api, nodes=4, queues=[{"name": "a", "deserved": 16}, {"name": "b", "deserved": 16, "limit": 16}])
    created = rfc3339(time.time() - 60)
    pods = [gated_pod(f"g-{i}", "a", gpus=8, job="g", replicas=2) for i in range(2)]
    pods += [gated_pod("half", "a", gpus=8, job="h", replicas=3), gated_pod("big", "b", gpus=16)]
    bad = gated_pod("bad", "a")
    bad["metadata"]["annotations"] = {names.GPU_INDEX_ANNOTATION: "x"}
    pods += [bad] + [gated_pod(f"b-{i}", "b", gpus=8) for i in range(3)]
    for pod in pods:
        pod["metadata"]["creationTimestamp"] = created
        api.put(pod)


def what_was_written(api) -> dict:
    """The writes (the Lease's aside), the pods' patches, the Events and the reservations; in any
    order (releases and Events go out side by side), with the order of the kinds of write: the
    reservation, then the releases, then the Events."""
    events = sorted((e["regarding"]["name"], e["reason"], e["type"], e["note"])
                    for ns in ("a", "b", "jobs") for e in api.objects("events", ns, group="events.k8s.io"))
    reservations = api.get("configmaps", names.RESERVATIONS_CONFIGMAP, "gpu-policy") or {}
    writes = [(r.method, r.path, r.status) for r in api.requests if r.method in WRITES and not r.path.startswith(LEASE)]
    kinds = [path.split("/")[-2] if method == "PATCH" else path.rpartition("/")[2] for method, path, _ in writes]
    uids = {p["metadata"]["uid"]: p["metadata"]["name"] for ns in ("a", "b", "jobs") for p in api.objects("pods", ns)}
    patches = [(ns, name, [{**op, "value": uids[op["value"]]} if op.get("path") == "/metadata/uid" else op for op in ops])
               for ns, name, ops in api.patches]  # each server makes its own uids: named by their pod
    return {"writes": sorted(writes), "kinds": [k for i, k in enumerate(kinds) if not i or kinds[i - 1] != k],
            "patches": sorted(patches, key=repr), "events": events, "reservations": reservations.get("data")}


def one_controller_round(api, tmp_path, fake_time) -> None:
    k8s = KubernetesCluster(kubeconfig=api.kubeconfig(tmp_path / "controller"),
                            settings=KubernetesSettings(backoff_jitter=0, lease_duration_s=15.0),
                            clock=fake_time.time, sleep=fake_time.sleep, monotonic=fake_time.monotonic)
    c = Controller(k8s, ControllerSettings(debounce_s=0.2, watch_timeout_s=2.0))
    c.start()
    try:
        sees(c, lambda: c.cache.synced)
        api.reset_log()
        assert c.step()  # leads, plans and acts: one round
    finally:
        c.shut_down()


def one_shot_release(api, tmp_path, capsys) -> dict:
    api.reset_log()
    argv = ["apply", "--cluster", "k8s://", "--kubeconfig", api.kubeconfig(tmp_path / "one-shot"), "--execute",
            "--release", "--format", "json"]
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_one_shot_release_writes_what_a_controller_round_writes(tmp_path, fake_time, capsys):
    with FakeKubernetes() as by_controller, FakeKubernetes() as by_hand:
        gated_cluster(by_controller)
        gated_cluster(by_hand)
        one_controller_round(by_controller, tmp_path, fake_time)
        out = one_shot_release(by_hand, tmp_path, capsys)
        expected, got = what_was_written(by_controller), what_was_written(by_hand)
        reserved = {k: json.loads(v) for k, v in (got.pop("reservations") or {}).items()}
        assert {k: json.loads(v) for k, v in (expected.pop("reservations") or {}).items()}.keys() == reserved.keys()
        assert got == expected and got["kinds"] == ["configmaps", "pods", "events"]
        assert sorted(released(by_hand)) == ["b-0", "b-1", "g-0", "g-1"] and list(reserved) == ["jobs.g"]
        # the one-shot command releases the gated pods as its look listed them: no GET per pod
        reads = [r.path.rpartition("/")[2] for r in by_hand.requests if r.method == "GET" and "/namespaces/jobs/pods/" in r.path]
        assert reads == []
        assert sorted((o["job"], o["result"]) for o in out["outcomes"] if o["action"] == "release") == [
            ("jobs/b-0", "done"), ("jobs/b-1", "done"), ("jobs/g", "done")]


def test_a_victim_is_told_why_by_a_one_shot_release_too(api, tmp_path, capsys):
    eviction_cluster(api, pods=2)
    api.delete("pods", "owner", "b")
    api.put({"kind": "Namespace", "metadata": {"name": "b", "labels": {"gpu-policy.io/managed": "true"}}})
    api.put(gated_pod("owner", "team-b", gpus=8, namespace="b"))
    out = one_shot_release(api, tmp_path, capsys)
    posts = [(i, r.path) for i, r in enumerate(api.requests) if r.method == "POST"]
    told = [i for i, path in posts if path == "/apis/events.k8s.io/v1/namespaces/a/events"]
    assert len(told) == 2 and max(told) < min(i for i, path in posts if path.endswith("/eviction"))
    assert sorted((o["action"], o["result"]) for o in out["outcomes"]) == [("preempt", "done"), ("release", "done")]
    assert released(api, "b") == {"owner": "n"}


def test_without_release_a_one_shot_apply_leaves_gated_pods_alone(api, kubeconfig, capsys):
    gated_cluster(api)
    api.reset_log()
    assert main(["apply", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--execute", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["outcomes"] == []
    assert released(api) == {} and api.objects("events", "jobs", group="events.k8s.io") == []
    assert [r.path for r in api.requests if r.method in WRITES and not r.path.startswith(LEASE)] == []


def test_a_release_dry_run_says_what_it_would_release_and_writes_nothing(api, kubeconfig, capsys):
    gated_cluster(api)
    api.reset_log()
    assert main(["apply", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--release", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["executed"] is False
    assert sorted((o["job"], o["result"], o["detail"]) for o in out["outcomes"]) == [
        ("jobs/b-0", "dry run", "1 pod onto n1"), ("jobs/b-1", "dry run", "1 pod onto n2"),
        ("jobs/g", "dry run", "2 pods onto n3, n4")]
    assert {r.method for r in api.requests} == {"GET"}
