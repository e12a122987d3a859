"""The stand-in kube-scheduler (tests/kubernetes/fake/scheduler.py): what it binds and where."""

import pytest

from tests.kubernetes.fake import GATE, FakeKubernetes, FakeScheduler
from tests.kubernetes.fake.scheduler import quantity

NS = "ml"


@pytest.fixture
def fake():
    with FakeKubernetes() as api:
        yield api


def node(fake, name: str, gpus: int = 8, labels: dict | None = None, taints: list | None = None, **spec) -> None:
    fake.put({"kind": "Node", "metadata": {"name": name, "labels": labels or {}},
              "spec": {"taints": taints or [], **spec},
              "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi"}}})


def pod(fake, name: str, gpus: int = 1, **spec) -> None:
    fake.put({"kind": "Pod", "metadata": {"name": name, "namespace": NS},
              "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}], **spec},
              "status": {"phase": "Pending"}})


def where(fake, name: str) -> str | None:
    return fake.get("pods", name, NS)["spec"].get("nodeName")


def test_quantities_read_as_kubernetes_writes_them():
    assert quantity("500m") == 0.5 and quantity("2Gi") == 2 * 2**30 and quantity("1e3") == 1000 and quantity(4) == 4


def test_it_spreads_over_the_least_allocated_nodes(fake):
    for n in ("a", "b", "c"):
        node(fake, n)
    for i in range(3):
        pod(fake, f"p{i}")
    FakeScheduler(fake).schedule_once()
    assert sorted(where(fake, f"p{i}") for i in range(3)) == ["a", "b", "c"]
    assert fake.get("pods", "p0", NS)["status"]["phase"] == "Running"


def test_gated_deleting_and_bound_pods_are_left_alone(fake):
    node(fake, "a")
    pod(fake, "gated", schedulingGates=[{"name": GATE}])
    pod(fake, "done", nodeName="a")
    fake.put({"kind": "Pod", "metadata": {"name": "going", "namespace": NS, "deletionTimestamp": "2026-11-26T00:00:00Z"},
              "spec": {"containers": []}})
    assert FakeScheduler(fake).schedule_once() == []


def test_free_gpus_are_counted_from_the_pods_bound_there(fake):
    node(fake, "a", gpus=8)
    pod(fake, "big", gpus=6, nodeName="a")
    pod(fake, "fits", gpus=2)
    pod(fake, "too-big", gpus=1)
    scheduler = FakeScheduler(fake)
    assert scheduler.schedule_once() == [(NS, "fits", "a")]
    assert scheduler.unschedulable == {f"{NS}/too-big": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}


def test_oldest_first_or_newest_first(fake):
    node(fake, "a", gpus=1)
    pod(fake, "old")
    pod(fake, "new")
    assert FakeScheduler(fake, newest_first=True).schedule_once() == [(NS, "new", "a")]


def test_node_selector_including_the_hostname(fake):
    node(fake, "a")
    node(fake, "b", labels={"zone": "z1"})
    pod(fake, "pinned", nodeSelector={"kubernetes.io/hostname": "a"})
    pod(fake, "zoned", nodeSelector={"zone": "z1"})
    pod(fake, "nowhere", nodeSelector={"zone": "z9"})
    scheduler = FakeScheduler(fake)
    scheduler.schedule_once()
    assert (where(fake, "pinned"), where(fake, "zoned"), where(fake, "nowhere")) == ("a", "b", None)
    assert "didn't match Pod's node affinity/selector" in scheduler.unschedulable[f"{NS}/nowhere"]


@pytest.mark.parametrize("expression, fields, expected", [
    ({"key": "gen", "operator": "In", "values": ["h100"]}, False, "b"),
    ({"key": "gen", "operator": "NotIn", "values": ["h100"]}, False, "a"),
    ({"key": "gen", "operator": "Exists"}, False, "b"),
    ({"key": "gen", "operator": "DoesNotExist"}, False, "a"),
    ({"key": "mem", "operator": "Gt", "values": ["40"]}, False, "b"),
    ({"key": "mem", "operator": "Lt", "values": ["40"]}, False, None),
    ({"key": "metadata.name", "operator": "In", "values": ["a"]}, True, "a"),
])
def test_required_node_affinity(fake, expression, fields, expected):
    node(fake, "a", gpus=16)  # emptier: spreading alone would choose it
    node(fake, "b", labels={"gen": "h100", "mem": "80"})
    term = {"matchFields" if fields else "matchExpressions": [expression]}
    pod(fake, "p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}})
    FakeScheduler(fake).schedule_once()
    assert where(fake, "p") == expected


def test_taints_need_tolerations_and_unschedulable_nodes_are_skipped(fake):
    node(fake, "tainted", gpus=16, taints=[{"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}])
    node(fake, "cordoned", gpus=16, unschedulable=True)
    node(fake, "plain")
    pod(fake, "plain-pod")
    pod(fake, "tolerant", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "team-a",
                                        "effect": "NoSchedule"}])
    FakeScheduler(fake).schedule_once()
    assert where(fake, "plain-pod") == "plain" and where(fake, "tolerant") == "tainted"
