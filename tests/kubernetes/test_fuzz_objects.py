"""Property-based fuzzing of Kubernetes objects through the real client (issue 29).

Pods, nodes, reservations and leases are mutated at random paths with random JSON values
(wrong types, NaN, huge numbers, deep lists), served by the fake API server and observed
through the `kubernetes` client: the observation and the plan must succeed, with the odd
object left out or warned about, and a Lease must end in holding it or in one clean line.
The queues ConfigMap, gpu-policy's own configuration, may instead fail in one line.

The example budget comes from the fuzz profile (tests/fuzz_profiles.py): fixed in CI,
longer for local runs (``GPU_POLICY_FUZZ=long``).
"""

import json
import math

import pytest

from gpu_policy import plan
from gpu_policy.errors import MESSAGE_LIMIT, GpuPolicyError
from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings, names
from gpu_policy.model import Node, Queue, Scenario
from tests.fuzz_profiles import examples
from tests.kubernetes.conftest import FakeTime
from tests.kubernetes.fake_api import FakeKubernetes
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the [dev] extra: pip install -e '.[dev]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10 ** 40), max_value=10 ** 40)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
    | st.sampled_from(["1e9999999Ki", "²", "9" * 5000, "5e-324", "-1", "nan", "2000", "1Pi", "0.5"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)


def paths(obj, prefix=()):
    """Every path into `obj` (keys and list indices), the object itself excluded."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for key, value in items:
        yield prefix + (key,)
        yield from paths(value, prefix + (key,))


def mutated(obj: dict, data, keep: set) -> dict:
    """`obj` with one path (never under `keep`, e.g. the object's name) set to a random value."""
    choices = [p for p in paths(obj) if p[:2] not in keep] + [("spec", "extra"), ("metadata", "annotations", "x")]
    path = data.draw(st.sampled_from(choices))
    at = obj
    for key in path[:-1]:
        if not isinstance(at, (dict, list)):
            return obj
        at = at.setdefault(key, {}) if isinstance(at, dict) else at[key]
    if isinstance(at, (dict, list)):
        at[path[-1]] = data.draw(JSON)
    return obj


#: what the fake server needs to store the object (its kind, name and place) stays as it is
KEEP = {("kind",), ("apiVersion",), ("metadata",), ("metadata", "name"), ("metadata", "namespace"),
        ("status", "phase"), ("metadata", "resourceVersion")}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with FakeKubernetes() as api:
        yield api, api.kubeconfig(tmp_path_factory.mktemp("fuzz") / "kubeconfig")


def base(api) -> None:
    for obj in list(api.objects("pods", "ml")) + list(api.objects("nodes")):
        api.delete("pods" if obj["kind"] == "Pod" else "nodes", obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
    api.put(node_object(Node(name="n1", gpus=8, cpu=64, memory_gib=512)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=8)], jobs=[])))
    api.put(gpu_pod("ml", "fine", labels={names.QUEUE_LABEL: "team-a"}, node="n1"))


def cluster(kubeconfig: str, fake_time: FakeTime) -> KubernetesCluster:
    return KubernetesCluster("k8s://", kubeconfig=kubeconfig, settings=KubernetesSettings(deadline_s=5),
                             sleep=fake_time.sleep, monotonic=fake_time.monotonic, clock=fake_time.time)


def assert_plans(api, kubeconfig) -> None:
    observation = cluster(kubeconfig, FakeTime()).observe()
    result = plan(observation.scenario)
    assert {j.name for j in result.jobs} == {j.name for j in observation.scenario.jobs}
    json.dumps(result.to_dict(), allow_nan=False)


@settings(max_examples=examples(80), derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), kind=st.sampled_from(["pod", "node"]))
def test_a_mutated_pod_or_node_never_stops_planning(served, data, kind):
    api, kubeconfig = served
    base(api)
    if kind == "pod":
        obj = gpu_pod("ml", "odd", labels={names.QUEUE_LABEL: "team-a"},
                      annotations={names.GPU_INDEX_ANNOTATION: "0"}, node="n1", priority=5)
    else:
        obj = node_object(Node(name="odd", gpus=4, cpu=8, memory_gib=32, gpu_model="A100"))
    api.put(mutated(obj, data, KEEP))
    assert_plans(api, kubeconfig)


@settings(max_examples=examples(40), derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_mutated_reservation_never_stops_planning(served, data):
    api, kubeconfig = served
    base(api)
    value = {"job": "step", "queue": "team-a", "gpus": 2, "replicas": 1, "nodes": ["n1"], "gpu_indices": [[4, 5]],
             "priority": 50, "expires_at": "2030-01-01T00:00:00Z"}
    value = mutated({"v": value}, data, set())["v"]
    text = json.dumps(value) if data.draw(st.booleans()) else data.draw(st.text(max_size=30))
    api.put({"kind": "ConfigMap", "metadata": {"name": names.RESERVATIONS_CONFIGMAP, "namespace": "gpu-policy"},
             "data": {data.draw(st.sampled_from(["ml.step", "ml.other", "nodot", "ml." + "x" * 300])): text}})
    assert_plans(api, kubeconfig)
    api.delete("configmaps", names.RESERVATIONS_CONFIGMAP, "gpu-policy")


@settings(max_examples=examples(40), derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_mutated_lease_is_held_or_one_line(served, data):
    api, kubeconfig = served
    fake_time = FakeTime()
    lease = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
             "metadata": {"name": names.LEASE_NAME, "namespace": "gpu-policy"},
             "spec": {"holderIdentity": "other", "leaseDurationSeconds": 30, "leaseTransitions": 2,
                      "renewTime": "2027-01-15T08:00:00.000000Z", "acquireTime": "2027-01-15T08:00:00.000000Z"}}
    api.put(mutated(lease, data, KEEP))
    c = cluster(kubeconfig, fake_time)
    c.settings.lease_wait_s = 200
    try:
        c.lease.acquire()
    except GpuPolicyError as e:
        assert "\n" not in str(e) and len(str(e)) <= MESSAGE_LIMIT
    else:
        c.lease.release()
    assert math.isfinite(fake_time.now) and fake_time.now - 1000 <= 200 + 1


@settings(max_examples=examples(40), derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(text=st.text(max_size=200) | JSON.map(json.dumps))
def test_a_mutated_queues_config_map_plans_or_is_one_line(served, text):
    api, kubeconfig = served
    base(api)
    api.put({"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": "gpu-policy"},
             "data": {names.QUEUES_KEY: text}})
    try:
        assert_plans(api, kubeconfig)
    except GpuPolicyError as e:
        assert "\n" not in str(e) and str(e).startswith("ConfigMap gpu-policy/gpu-policy-queues: ")
