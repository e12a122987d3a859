"""Bad input from a cluster is still bad input: one line naming the object and the field,
exit status 2, no traceback (CLI)."""

import pytest

from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Queue, Scenario
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map


def fails(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err.strip()


@pytest.fixture
def base(api):
    api.put(node_object(Node(name="n", gpus=8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=8)], jobs=[])))
    return api


def queues_text(api, text):
    api.put({"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": "gpu-policy"},
             "data": {names.QUEUES_KEY: text}})


@pytest.mark.parametrize("text,message", [
    ("- {name: team-a, deserved: -1}",
     "ConfigMap gpu-policy/gpu-policy-queues: data.queues.yaml[0].deserved: must be >= 0, got -1"),
    ("- {name: team-a, parent: nope}",
     'ConfigMap gpu-policy/gpu-policy-queues: data.queues.yaml[0].parent: unknown queue "nope"'),
    ("- {name: team-a, deserved: [1",
     "ConfigMap gpu-policy/gpu-policy-queues: data.queues.yaml: not valid YAML or JSON at line 2: "
     "did not find expected ',' or ']'"),
    ("team-a: 8", "ConfigMap gpu-policy/gpu-policy-queues: data.queues.yaml: must be a list of queues, got dict"),
])
def test_malformed_queue_config_map(base, kubeconfig, capsys, text, message):
    queues_text(base, text)
    assert fails(capsys, "plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig) == f"gpu-policy: {message}"


@pytest.mark.parametrize("gpu,field,problem", [
    ({"quota": -5}, "spec.resources.gpu.quota", "must be >= 0, or -1 for unlimited, got -5"),
    ({"quota": 2, "limit": -3}, "spec.resources.gpu.limit", "must be >= 0, or -1 for unlimited, got -3"),
    ({"quota": 2, "overQuotaWeight": -1}, "spec.resources.gpu.overQuotaWeight", "must be >= 0, got -1"),
])
def test_a_kai_queue_with_a_bad_number(api, kubeconfig, capsys, gpu, field, problem):
    api.put(node_object(Node(name="n", gpus=8)))
    api.put({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"},
             "spec": {"resources": {"gpu": gpu}}})
    assert fails(capsys, "plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig) == \
        f"gpu-policy: Queue team-a: {field}: {problem}"


def test_an_unreachable_api_server(dead_kubeconfig, capsys):
    err = fails(capsys, "plan", "--cluster", "k8s://", "--kubeconfig", dead_kubeconfig, "--api-deadline", "0.5")
    assert err.startswith("gpu-policy: k8s://: list nodes: the API server is unreachable (connection refused); gave up")


def test_rbac_refusal(base, kubeconfig, capsys):
    base.forbid("get", "configmaps")
    err = fails(capsys, "plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig)
    assert err.startswith('gpu-policy: k8s://: get ConfigMap gpu-policy/gpu-policy-queues: refused (403): configmaps is '
                          'forbidden: User "system:serviceaccount:gpu-policy:gpu-policy" cannot get resource "configmaps"')
    assert err.endswith("grant the permissions in deploy/ (docs/kubernetes.md)")


def test_a_missing_kubeconfig_and_misplaced_options(tmp_path, capsys):
    assert fails(capsys, "snapshot", "--cluster", "k8s://", "--kubeconfig", str(tmp_path / "none")).startswith(
        f"gpu-policy: k8s://: cannot load the Kubernetes configuration {tmp_path / 'none'}:")
    assert fails(capsys, "snapshot", "--cluster", "tests/scenarios/seed1-greedy-team.yaml", "--kubeconfig", "x") == \
        "gpu-policy: --kubeconfig: applies to k8s:// clusters only, not to tests/scenarios/seed1-greedy-team.yaml"
    assert fails(capsys, "snapshot", "--cluster", "k9s://x") == \
        "gpu-policy: cluster: unknown scheme 'k9s':// (known: file, k8s; a scenario file needs no scheme)"


def test_one_pod_asking_2000_gpus_on_a_1000_node_cluster_waits_with_an_event(api, cluster, fake_time):
    """Issue 29's Done-when, through the controller: on 1,000 nodes every other pod is
    admitted, and the odd one waits with a Warning Event naming it, the field and the value."""
    from tests.kubernetes.controller_harness import (cluster_of, described, gated_pod, new_controller,
                                                     not_admitted_note, released, settle)

    cluster_of(api, nodes=1000)
    fine = [f"fine-{k}" for k in range(100)]
    for k, name in enumerate(fine):
        api.put(gated_pod(name, "ab"[k % 2], gpus=1 + k % 8))
    api.put(gated_pod("typo", "a", gpus=2000))
    controller = new_controller(cluster)
    try:
        settle(controller, fake_time, lambda: controller.plans >= 1 and described(api, "jobs", "typo"))
        assert sorted(released(api)) == sorted(fine)
        note = not_admitted_note(api, "jobs", "typo")
        assert note.startswith("NoNodeFits: pod jobs/typo: spec.containers[*].resources.requests.nvidia.com/gpu: "
                               "no node could ever hold it: the largest offers 8 GPUs, got 2,000"), note
    finally:
        controller.shut_down()
