"""The fake API server itself (tests/kubernetes/fake/), through the real `kubernetes` client:
watches, JSON and strategic merge patches, the scheduling-gate rules, the admission policy's
gate, events.k8s.io Events and two clients at once."""

import threading

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from tests.kubernetes.fake import GATE, FakeKubernetes  # noqa: E402

NS = "ml"


@pytest.fixture
def fake():
    with FakeKubernetes() as api:
        yield api


@pytest.fixture
def core(fake, tmp_path):
    """A CoreV1Api through a kubeconfig pointing at the fake."""
    return client.CoreV1Api(config.new_client_from_config(config_file=fake.kubeconfig(tmp_path / "kubeconfig")))


def pod(name: str, gpus: int = 0, labels: dict | None = None, gates: tuple[str, ...] = (), **spec) -> dict:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "main", "image": "train:1", "resources": resources}], **spec}}
    if gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return body


def events(stream, count: int, w: watch.Watch) -> list[tuple[str, str]]:
    """The next `count` events as (type, name or resourceVersion for a bookmark); then stop."""
    out = []
    for e in stream:
        meta = e["raw_object"].get("metadata", {})
        out.append((e["type"], meta["resourceVersion"] if e["type"] == "BOOKMARK" else meta.get("name")))
        if len(out) == count:
            w.stop()
            break
    return out


# -- watch ----------------------------------------------------------------------------------------
def test_a_watch_from_a_lists_version_streams_every_change_after_it(fake, core):
    core.create_namespaced_pod(NS, pod("before"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("a"))
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("a", NS)
    w = watch.Watch()
    got = events(w.stream(core.list_namespaced_pod, NS, resource_version=rv), 3, w)
    assert got == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert fake.watch_connections("pods") == 1
    assert ("watch", "", "pods") in fake.permissions_used()


def test_a_watch_without_a_version_starts_with_what_is_there_then_follows_live_changes(fake, core):
    core.create_namespaced_pod(NS, pod("old"))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, NS)
    assert next(stream)["raw_object"]["metadata"]["name"] == "old"

    def later():
        fake.await_watches(1, "pods")
        core.create_namespaced_pod(NS, pod("new"))

    threading.Thread(target=later, daemon=True).start()
    assert events(stream, 1, w) == [("ADDED", "new")]


def test_selectors_apply_to_events_an_object_entering_is_added_and_one_leaving_deleted(fake, core):
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("p"))
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"team": "a"}}})
    core.patch_namespaced_pod("p", NS, {"metadata": {"annotations": {"n": "1"}}})
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"team": "b"}}})
    core.create_namespaced_pod("other", pod("q", labels={"team": "a"}))
    w = watch.Watch()
    got = events(w.stream(core.list_namespaced_pod, NS, label_selector="team in (a)", resource_version=rv), 3, w)
    assert got == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]
    w = watch.Watch()
    got = events(w.stream(core.list_pod_for_all_namespaces, field_selector="metadata.namespace=other",
                          resource_version=rv), 1, w)
    assert got == [("ADDED", "q")]


def test_a_version_older_than_the_history_answers_410_gone(fake, core):
    core.create_namespaced_pod(NS, pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("b"))
    fake.expire_history("pods")
    with pytest.raises(ApiException) as gone:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv))
    assert gone.value.status == 410
    nodes_rv = core.list_node().metadata.resource_version  # other resources keep their history
    w = watch.Watch()
    fake.put({"kind": "Node", "metadata": {"name": "n1"}})
    assert events(w.stream(core.list_node, resource_version=nodes_rv), 1, w) == [("ADDED", "n1")]


def test_a_bounded_history_forgets_old_changes():
    with FakeKubernetes(history=3) as fake:
        for i in range(10):
            fake.put({"kind": "Node", "metadata": {"name": f"n{i}"}})
        history = fake._history_of(fake.resources[("", "nodes")])
        assert 3 <= len(history.changes) <= 6 and history.floor > 1


def test_an_open_watch_gets_410_when_its_history_expires(fake, core):
    rv = core.list_namespaced_pod(NS).metadata.resource_version

    def compaction():
        fake.await_watches(1, "pods")
        fake.put({"kind": "Node", "metadata": {"name": "n1"}})  # the store moves on: rv is older than what is kept
        fake.expire_history("pods")

    threading.Thread(target=compaction, daemon=True).start()
    with pytest.raises(ApiException) as gone:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv))
    assert gone.value.status == 410 and fake.watch_connections("pods") == 2  # the client retries once, then gives up


def test_bookmarks_come_when_allowed_on_demand_and_carry_the_version(fake, core):
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    threading.Thread(target=lambda: (fake.await_watches(1, "pods"), fake.send_bookmarks()), daemon=True).start()
    w = watch.Watch()
    [(kind, version)] = events(w.stream(core.list_namespaced_pod, NS, resource_version=rv,
                                        allow_watch_bookmarks=True), 1, w)
    assert kind == "BOOKMARK" and int(version) >= int(rv)


def test_bookmarks_come_every_interval():
    with FakeKubernetes(bookmark_interval_s=0.05) as fake:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            api = client.CoreV1Api(config.new_client_from_config(config_file=fake.kubeconfig(f"{tmp}/k")))
        w = watch.Watch()
        got = events(w.stream(api.list_node, resource_version="1", allow_watch_bookmarks=True), 2, w)
        assert [kind for kind, _ in got] == ["BOOKMARK", "BOOKMARK"]


def test_a_watch_without_bookmarks_allowed_gets_none(fake, core):
    rv = core.list_namespaced_pod(NS).metadata.resource_version

    def later():
        fake.await_watches(1, "pods")
        fake.send_bookmarks()
        core.create_namespaced_pod(NS, pod("a"))

    threading.Thread(target=later, daemon=True).start()
    w = watch.Watch()
    assert events(w.stream(core.list_namespaced_pod, NS, resource_version=rv), 1, w) == [("ADDED", "a")]


def test_a_watch_ends_by_itself_at_its_timeout(fake, core):
    assert list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1)) == []
    assert fake.open_watches() == 0


def test_a_dropped_watch_is_resumed_by_the_client_from_its_last_version_and_loses_nothing(fake, core):
    rv = core.list_namespaced_pod(NS).metadata.resource_version

    def later():
        fake.await_watches(1, "pods")
        core.create_namespaced_pod(NS, pod("a"))
        fake.drop_watches()
        core.create_namespaced_pod(NS, pod("b"))

    threading.Thread(target=later, daemon=True).start()
    w = watch.Watch()
    assert events(w.stream(core.list_namespaced_pod, NS, resource_version=rv), 2, w) == [("ADDED", "a"), ("ADDED", "b")]
    assert fake.watch_connections("pods") >= 1


def test_an_abrupt_drop_is_an_error_for_the_client(fake, core):
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    threading.Thread(target=lambda: (fake.await_watches(1, "pods"), fake.drop_watches(abrupt=True)),
                     daemon=True).start()
    with pytest.raises(Exception) as dropped:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv))
    assert not isinstance(dropped.value, ApiException)


def test_a_watch_can_be_refused_like_any_request(fake, core):
    fake.forbid("watch", "pods")
    with pytest.raises(ApiException) as refused:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1))
    assert refused.value.status == 403


# -- patches and the scheduling-gate rules --------------------------------------------------------
def release(core, name: str, gate_index: int, node: str):
    """The release the spec settles: test and remove the gate, add the hostname selector."""
    return core.patch_namespaced_pod(name, NS, [
        {"op": "test", "path": f"/spec/schedulingGates/{gate_index}/name", "value": GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{gate_index}"},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": node}}])


def test_a_json_patch_releases_one_gate_and_adds_the_hostname_selector(fake, core):
    core.create_namespaced_pod(NS, pod("p", gpus=1, gates=("kueue.x-k8s.io/admission", GATE)))
    release(core, "p", 1, "n1")
    spec = fake.get("pods", "p", NS)["spec"]
    assert spec["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "n1"}


def test_a_failed_json_patch_test_is_422_and_changes_nothing(fake, core):
    core.create_namespaced_pod(NS, pod("p", gates=("other",)))
    before = fake.get("pods", "p", NS)
    with pytest.raises(ApiException) as refused:
        release(core, "p", 0, "n1")
    assert refused.value.status == 422 and "test failed" in refused.value.body
    assert fake.get("pods", "p", NS) == before


def test_a_gate_cannot_be_added_after_create(fake, core):
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod("p", NS, [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}])
    import json

    body = json.loads(refused.value.body)
    assert refused.value.status == 422 and body["kind"] == "Status" and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.schedulingGates"
    assert "only deletion is allowed" in body["message"]


def test_while_gated_node_selector_keys_may_be_added_but_not_changed(fake, core):
    core.create_namespaced_pod(NS, pod("p", gates=(GATE,), nodeSelector={"zone": "a"}))
    core.patch_namespaced_pod("p", NS, {"spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}}})
    with pytest.raises(ApiException) as changed:
        core.patch_namespaced_pod("p", NS, {"spec": {"nodeSelector": {"zone": "b"}}})
    assert changed.value.status == 422 and "spec.nodeSelector" in changed.value.body
    with pytest.raises(ApiException) as other:
        core.patch_namespaced_pod("p", NS, [{"op": "add", "path": "/spec/priority", "value": 5}])
    assert other.value.status == 422


def test_an_ungated_pods_node_selector_is_immutable(fake, core):
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod("p", NS, {"spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}}})
    assert refused.value.status == 422


def test_a_pod_with_gates_cannot_have_a_node_nor_be_bound(fake, core):
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(NS, pod("p", gates=(GATE,), nodeName="n1"))
    assert refused.value.status == 422 and "spec.nodeName" in refused.value.body
    core.create_namespaced_pod(NS, pod("q", gates=(GATE,)))
    with pytest.raises(ValueError, match="schedulingGates"):
        fake.bind(NS, "q", "n1")


def test_a_strategic_merge_merges_keyed_lists_and_deletes_by_directive(fake, core):
    core.create_namespaced_pod(NS, pod("p", gates=("a", "b")))
    core.patch_namespaced_pod("p", NS, {"spec": {"schedulingGates": [{"name": "a", "$patch": "delete"}]},
                                        "metadata": {"annotations": {"k": "v"}}})
    stored = fake.get("pods", "p", NS)
    assert stored["spec"]["schedulingGates"] == [{"name": "b"}] and stored["metadata"]["annotations"] == {"k": "v"}
    assert stored["spec"]["containers"][0]["name"] == "main"


# -- the MutatingAdmissionPolicy ------------------------------------------------------------------
@pytest.mark.parametrize("case, gated", [
    ("gpu limit", True), ("init container gpu", True), ("fraction annotation", True), ("no gpu", False),
    ("node named", False), ("unmanaged namespace", False)])
def test_the_admission_policy_gates_gpu_pods_created_in_managed_namespaces(fake, core, case, gated):
    fake.gate_gpu_pods = True
    fake.put({"kind": "Namespace", "metadata": {"name": NS, "labels": {"gpu-policy.io/managed": "true"}}})
    fake.put({"kind": "Namespace", "metadata": {"name": "free"}})
    body, namespace = pod("p", gpus=0 if case in ("no gpu", "init container gpu", "fraction annotation") else 1), NS
    if case == "init container gpu":
        body["spec"]["initContainers"] = [{"name": "init", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]
    if case == "fraction annotation":
        body["metadata"]["annotations"] = {"gpu-policy.io/gpu-fraction": "0.5"}
    if case == "node named":
        body["spec"]["nodeName"] = "n1"
    if case == "unmanaged namespace":
        namespace = "free"
    core.create_namespaced_pod(namespace, body)
    gates = fake.get("pods", "p", namespace)["spec"].get("schedulingGates") or []
    assert (gates == [{"name": GATE}]) is gated


def test_without_the_policy_nothing_is_gated(fake, core):
    fake.put({"kind": "Namespace", "metadata": {"name": NS, "labels": {"gpu-policy.io/managed": "true"}}})
    core.create_namespaced_pod(NS, pod("p", gpus=1))
    assert not fake.get("pods", "p", NS)["spec"].get("schedulingGates")


# -- events.k8s.io/v1 -----------------------------------------------------------------------------
def test_events_are_created_patched_listed_and_validated(fake, core):
    from datetime import datetime, timezone

    events_api = client.EventsV1Api(core.api_client)
    now = datetime(2026, 11, 26, tzinfo=timezone.utc)
    event = {"metadata": {"generateName": "p."}, "eventTime": now.isoformat(), "type": "Normal",
             "reason": "GpuPolicyWaiting", "action": "Wait", "note": "queue a above its limit",
             "reportingController": "gpu-policy.io/controller", "reportingInstance": "controller-0",
             "regarding": {"kind": "Pod", "namespace": NS, "name": "p"}}
    made = events_api.create_namespaced_event(NS, event)
    events_api.patch_namespaced_event(made.metadata.name, NS,
                                      {"series": {"count": 2, "lastObservedTime": now.isoformat()}})
    [stored] = events_api.list_namespaced_event(NS).items
    assert stored.series.count == 2 and stored.reason == "GpuPolicyWaiting"
    for broken in ({"reportingController": None}, {"note": "x" * 1025}, {"type": "Odd"}):
        with pytest.raises(ApiException) as refused:
            events_api.create_namespaced_event(NS, {**event, **broken})
        assert refused.value.status == 422


# -- two clients ----------------------------------------------------------------------------------
def test_two_clients_at_once_see_the_same_changes_and_conflict_on_stale_writes(fake, core, tmp_path):
    second = client.CoreV1Api(config.new_client_from_config(config_file=fake.kubeconfig(tmp_path / "second")))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    seen = {}

    def watch_with(name, api):
        w = watch.Watch()
        seen[name] = events(w.stream(api.list_namespaced_pod, NS, resource_version=rv), 8, w)

    watchers = [threading.Thread(target=watch_with, args=(n, a)) for n, a in (("first", core), ("second", second))]
    for t in watchers:
        t.start()
    writers = [threading.Thread(target=lambda a=a, i=i: [a.create_namespaced_pod(NS, pod(f"p{i}-{k}")) for k in range(4)])
               for i, a in enumerate((core, second))]
    for t in writers:
        t.start()
    for t in writers + watchers:
        t.join(timeout=60)
    assert len(seen["first"]) == 8 and seen["first"] == seen["second"]
    stale = core.read_namespaced_pod("p0-0", NS)
    second.patch_namespaced_pod("p0-0", NS, {"metadata": {"labels": {"by": "second"}}})
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_pod("p0-0", NS, stale)
    assert conflict.value.status == 409
