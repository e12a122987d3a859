"""One odd object never stops planning: it is left out (or waits) with a warning naming it,
the field and the value, and everything else is planned (issue 29)."""

import pytest

from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Queue, Scenario
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map

LEFT_OUT = "left out of planning, which goes on for everything else"
WAITS = "it waits, and planning goes on for everything else"


@pytest.fixture
def base(api):
    api.put(node_object(Node(name="n", gpus=8, cpu=64, memory_gib=512)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=8)], jobs=[])))
    api.put(gpu_pod("ml", "fine", labels={names.QUEUE_LABEL: "team-a"}))
    return api


def snapshot(capsys, kubeconfig) -> tuple[str, list[str]]:
    """The snapshot's scenario text and its warning lines; it must succeed."""
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out, [line.removeprefix("warning: ") for line in err.splitlines() if line.startswith("warning: ")]


def changed(obj: dict, change: dict) -> dict:
    """`obj` with each ``a__b__0__c`` path set to its value (list items by index)."""
    for path, value in change.items():
        *parents, last = path.split("__")
        at = obj
        for key in parents:
            at = at[int(key)] if isinstance(at, list) else at.setdefault(key, {})
        at[last] = value
    return obj


def odd_pod(**change) -> dict:
    return changed(gpu_pod("ml", "odd", labels={names.QUEUE_LABEL: "team-a"}), change)


FIELD_INDEX = f"metadata.annotations.{names.GPU_INDEX_ANNOTATION}"
FIELD_FRACTION = f"metadata.annotations.{names.FRACTION_ANNOTATION}"


@pytest.mark.parametrize("pod,line", [
    (odd_pod(metadata__annotations={names.GPU_INDEX_ANNOTATION: "²"}),
     f'pod ml/odd: {FIELD_INDEX}: must be GPU indices separated by commas, got "²": {LEFT_OUT}'),
    (odd_pod(metadata__annotations={names.GPU_INDEX_ANNOTATION: "9" * 5000}),
     f'pod ml/odd: {FIELD_INDEX}: must be GPU indices separated by commas, got "{"9" * 80}...": {LEFT_OUT}'),
    (odd_pod(metadata__annotations={names.FRACTION_ANNOTATION: "5e-324"}, spec__containers__0__resources={}),
     f'pod ml/odd: {FIELD_FRACTION}: must be a number in [0.001, 1), got "5e-324": {LEFT_OUT}'),
    (odd_pod(metadata__annotations={names.FRACTION_ANNOTATION: "1.5"}, spec__containers__0__resources={}),
     f'pod ml/odd: {FIELD_FRACTION}: must be a number in [0.001, 1), got "1.5": {LEFT_OUT}'),
    (odd_pod(metadata__labels={names.QUEUE_LABEL: "team-a", names.PREEMPTIBLE_LABEL: "yes"}),
     f'pod ml/odd: metadata.labels.{names.PREEMPTIBLE_LABEL}: must be "true" or "false", got "yes": {LEFT_OUT}'),
    (odd_pod(metadata__annotations={names.LAST_CHECKPOINT_ANNOTATION: "yesterday"}),
     f"pod ml/odd: metadata.annotations.{names.LAST_CHECKPOINT_ANNOTATION}: must be an RFC 3339 time in UTC such as "
     f'2026-01-31T12:00:00Z, got "yesterday": {LEFT_OUT}'),
    (odd_pod(spec__containers__0__resources={"requests": {"memory": "lots", "nvidia.com/gpu": "1"}}),
     "pod ml/odd: spec.containers[0].resources.requests.memory: must be a Kubernetes quantity such as 8, 500m or "
     f"64Gi, got 'lots': {LEFT_OUT}"),
    (odd_pod(spec__containers__0__resources={"requests": {"memory": "1e9999999Ki", "nvidia.com/gpu": "1"}}),
     "pod ml/odd: spec.containers[0].resources.requests.memory: must be a Kubernetes quantity below 10^30, "
     f"got '1e9999999Ki': {LEFT_OUT}"),
    (odd_pod(spec__containers="a string"), f'pod ml/odd: spec.containers: must be a list, got "a string": {LEFT_OUT}'),
    (odd_pod(spec__containers__0__resources={"requests": ["nvidia.com/gpu"]}),
     f"pod ml/odd: spec.containers[0].resources.requests: must be an object, got ['nvidia.com/gpu']: {LEFT_OUT}"),
    (odd_pod(spec__priority="high"), f'pod ml/odd: spec.priority: must be a whole number, got "high": {LEFT_OUT}'),
    (odd_pod(spec__containers__0__resources={"limits": {"nvidia.com/gpu": "2000"}}),
     f"pod ml/odd: spec.containers[*].resources.requests.nvidia.com/gpu: no node could ever hold it: the largest "
     f"offers 8 GPUs, got 2,000: {WAITS}"),
    (odd_pod(spec__containers__0__resources={"limits": {"nvidia.com/gpu": "1", "cpu": "10000000"}}),
     f"pod ml/odd: spec.containers[*].resources.requests.cpu: no node could ever hold it: the largest offers 64 "
     f"CPUs, got 1e+07: {WAITS}"),
    (odd_pod(spec__containers__0__resources={"limits": {"nvidia.com/gpu": "1", "memory": "2Ei"}}),
     f"pod ml/odd: spec.containers[*].resources.requests.memory: no node could ever hold it: the largest offers "
     f"512 GiB, got 2.14748e+09: {WAITS}"),
], ids=lambda v: v[:60] if isinstance(v, str) else None)
def test_an_odd_pod_is_left_out_and_the_rest_planned(base, kubeconfig, capsys, pod, line):
    base.put(pod)
    out, warnings = snapshot(capsys, kubeconfig)
    assert line in warnings
    assert "ml/fine" in out and "ml/odd" not in out


def test_a_pod_within_the_bounds_that_nothing_fits_is_planned_waiting(base, cluster):
    """1 PiB of memory is a request a scenario can hold: the plan says why it waits."""
    from gpu_policy import plan

    base.put(odd_pod(spec__containers__0__resources={"limits": {"nvidia.com/gpu": "1", "memory": "1Pi"}}))
    observation = cluster().observe()
    assert observation.object_warnings == []
    decision = plan(observation.scenario).job("ml/odd")
    assert decision.action == "wait" and decision.reason


def odd_node(**change) -> dict:
    return changed(node_object(Node(name="odd", gpus=8)), change)


@pytest.mark.parametrize("node,line", [
    (odd_node(metadata__annotations={names.UNHEALTHY_GPUS_ANNOTATION: "1" * 5000}),
     f'node odd: metadata.annotations.{names.UNHEALTHY_GPUS_ANNOTATION}: must be GPU indices below 8 separated by '
     f'commas, got "{"1" * 80}...": {LEFT_OUT}'),
    (odd_node(metadata__labels=["a", "b"]), f"node odd: metadata.labels: must be an object, got ['a', 'b']: {LEFT_OUT}"),
    (odd_node(status__conditions="Ready"), f'node odd: status.conditions: must be a list, got "Ready": {LEFT_OUT}'),
    (odd_node(spec__taints="NoSchedule"), f'node odd: spec.taints: must be a list, got "NoSchedule": {LEFT_OUT}'),
    (odd_node(status__conditions=[None]), f"node odd: status.conditions[0]: must be an object, got None: {LEFT_OUT}"),
    (odd_node(status__allocatable={"nvidia.com/gpu": "8", "cpu": float("nan")}),
     f"node odd: status.allocatable.cpu: must be a Kubernetes quantity such as 8, 500m or 64Gi, got nan: {LEFT_OUT}"),
    (odd_node(status__allocatable={"nvidia.com/gpu": "8", "memory": "1e9999999Ki"}),
     f"node odd: status.allocatable.memory: must be a Kubernetes quantity below 10^30, got '1e9999999Ki': {LEFT_OUT}"),
    (odd_node(status__allocatable={"nvidia.com/gpu": "100000"}),
     f"node odd: status.allocatable.nvidia.com/gpu: must be a whole number from 0 to 1,024, got 100000: {LEFT_OUT}"),
], ids=lambda v: v[:60] if isinstance(v, str) else None)
def test_an_odd_node_is_left_out_and_the_rest_planned(base, kubeconfig, capsys, node, line):
    base.put(node)
    out, warnings = snapshot(capsys, kubeconfig)
    assert line in warnings
    assert "name: n," in out and "name: odd" not in out and "ml/fine" in out


def test_the_warnings_are_structured_for_events(base, cluster):
    base.put(odd_pod(spec__containers__0__resources={"limits": {"nvidia.com/gpu": "2000"}}))
    observation = cluster().observe()
    (warning,) = observation.object_warnings
    assert (warning.object, warning.field, warning.value) == (
        "pod ml/odd", "spec.containers[*].resources.requests.nvidia.com/gpu", "2,000")
    assert [j.name for j in observation.scenario.jobs] == ["ml/fine"]


def test_one_pod_asking_2000_gpus_on_a_large_cluster(api, cluster):
    """Every other pod is still planned; the odd pod waits with a warning naming it."""
    from gpu_policy import plan
    from tests.kubernetes.objects import large_scenario, load_into

    load_into(api, large_scenario(nodes=60, pods=300), now=1.8e9)
    api.put(gpu_pod("jobs", "typo", gpus=2000, labels={names.QUEUE_LABEL: "team-0"}))
    observation = cluster().observe()
    assert [w.object for w in observation.object_warnings] == ["pod jobs/typo"]
    result = plan(observation.scenario)
    assert result.solver.status.lower().startswith(("optimal", "feasible"))
    assert len(result.jobs) == len(observation.scenario.jobs) > 250



def test_a_pod_named_by_no_string_is_a_warning_in_a_one_shot_look_too():
    """The one-shot look keeps its gated and left-out pods as listed (for their releases and
    Events): a pod whose name is no string is left out with a warning there too, never a crash."""
    from gpu_policy.kubernetes.cluster import _gated_or_left_out
    from gpu_policy.kubernetes.read.isolate import read_each
    from gpu_policy.kubernetes.read.pods import read_pod
    from gpu_policy.kubernetes.read.shape import POD

    odd = {"metadata": {"name": ["x"], "namespace": "a"}, "spec": {"containers": [],
                                                                   "schedulingGates": [{"name": names.ADMISSION_GATE}]}}
    views, bad = read_each([odd], "pod", POD, lambda p: read_pod(p, "nvidia.com/gpu"))
    assert views == [] and len(bad) == 1
    assert _gated_or_left_out([odd], {w.pod for w in bad if w.pod is not None}) == {}
