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
