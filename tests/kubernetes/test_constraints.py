"""Placement constraints and queue users read from the cluster (docs/kubernetes.md,
"Placement constraints", "Who may use a queue"): pods' node selectors, required node
affinity and tolerations, nodes' labels and taints, queues' namespaces."""

import re

import pytest
import yaml

from gpu_policy import plan
from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes import names
from gpu_policy.model import Node, Queue, Scenario
from tests.kubernetes.objects import gpu_pod, node_object, queues_config_map

NOW = 1_800_000_000.0
QUEUES = [Queue("team-a", deserved=8), Queue("team-b", deserved=8)]


@pytest.fixture
def seeded(api):
    """node-1 (zone a) and node-2 (zone b, tainted dedicated=ml:NoSchedule), 8 GPUs each."""
    api.put(node_object(Node(name="node-1", gpus=8, labels={"zone": "a", "rack": "r1"})))
    api.put(node_object(Node(name="node-2", gpus=8, labels={"zone": "b", "rack": "r2"},
                             taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])))
    api.put(queues_config_map(Scenario(nodes=[], queues=QUEUES, jobs=[])))
    return api


def look(cluster):
    obs = cluster(clock=lambda: NOW).observe()
    return obs.scenario, {j.name: j for j in obs.scenario.jobs}


def team_a(**more):
    return {names.QUEUE_LABEL: "team-a", **more}


def affinity(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def test_selectors_affinity_and_tolerations_become_the_jobs_constraints(seeded, cluster):
    seeded.put(gpu_pod("ml", "sel", labels=team_a(), nodeSelector={"zone": "b", names.GPU_PRODUCT_LABEL: "H100"}))
    seeded.put(gpu_pod("ml", "aff", labels=team_a(), affinity=affinity(
        {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r1"]},
                              {"key": "gpus", "operator": "Gt", "values": ["4"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]})))
    seeded.put(gpu_pod("ml", "tol", labels=team_a(), tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "nvidia.com/gpu", "operator": "Exists"}]))
    scenario, got = look(cluster)
    assert got["ml/sel"].node_selector == {"zone": "b"} and got["ml/sel"].gpu_model == ["H100"]
    assert got["ml/aff"].node_affinity == [
        {"match_expressions": [{"key": "rack", "operator": "NotIn", "values": ["r1"]},
                               {"key": "gpus", "operator": "Gt", "values": ["4"]}]},
        {"match_fields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]
    # the lifecycle and GPU tolerations every GPU pod carries are not constraints of the plan
    assert got["ml/tol"].tolerations == [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    # nodes keep the labels some job looks at, and their taints but the GPU one
    assert {n.name: n.labels for n in scenario.nodes} == {"node-1": {"rack": "r1", "zone": "a"},
                                                         "node-2": {"rack": "r2", "zone": "b"}}
    assert scenario.node("node-2").taints == [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    assert scenario.node("node-1").taints == [] and scenario.node("node-2").unhealthy_gpus == []


def test_a_tainted_node_takes_the_pods_that_tolerate_it_and_keeps_the_rest(seeded, cluster):
    seeded.put(gpu_pod("ml", "full", gpus=8, node="node-1", labels=team_a()))
    seeded.put(gpu_pod("ml", "old", gpus=2, node="node-2", labels=team_a()))  # bound before the taint
    seeded.put(gpu_pod("ml", "plain", gpus=2, labels=team_a()))
    seeded.put(gpu_pod("ml", "tolerant", gpus=2, labels={names.QUEUE_LABEL: "team-b"},
                       tolerations=[{"key": "dedicated", "operator": "Exists"}]))
    scenario, _ = look(cluster)
    result = plan(scenario)
    assert result.job("ml/old").action == "keep"
    assert (result.job("ml/tolerant").action, result.job("ml/tolerant").replicas[0].node) == ("start", "node-2")
    assert result.job("ml/plain").action == "wait"
    assert result.job("ml/plain").reason.startswith(
        "needs 2 GPUs on one node; the largest free block of the nodes it may use is 0")


def test_a_selector_no_node_matches_waits_with_that_reason(seeded, cluster):
    seeded.put(gpu_pod("ml", "h100", labels=team_a(), nodeSelector={"zone": "c"}))
    result = plan(look(cluster)[0])
    assert result.job("ml/h100").reason == "can never fit: no node matches its node selector zone=c"


def test_a_pod_pinned_by_its_hostname_selector_goes_there(seeded, cluster):
    seeded.put(gpu_pod("ml", "pinned", gpus=4, labels=team_a(), nodeSelector={names.HOSTNAME_LABEL: "node-2"},
                       tolerations=[{"key": "dedicated", "operator": "Exists"}]))
    scenario, _ = look(cluster)
    assert scenario.node("node-2").labels == {names.HOSTNAME_LABEL: "node-2"}
    assert plan(scenario).job("ml/pinned").replicas[0].node == "node-2"


@pytest.mark.parametrize("spec,field", [
    ({"nodeSelector": {"zone": ["a"]}}, "spec.nodeSelector"),
    ({"affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]})},
     "nodeSelectorTerms[0].match_expressions[0].operator"),
    ({"affinity": affinity({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]})},
     "nodeSelectorTerms[0].match_fields[0].key"),
    ({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}, "spec.tolerations[0].value"),
])
def test_a_bad_constraint_names_the_pod_and_the_field(seeded, cluster, spec, field):
    """The pod is left out with a warning (issue 29: one odd object never stops planning)."""
    seeded.put(gpu_pod("ml", "bad", labels=team_a(), **spec))
    observation = cluster().observe()
    (warning,) = observation.object_warnings
    assert re.match(f"pod ml/bad: .*{field.replace('[', '.').replace(']', '.')}", warning.line())
    assert "ml/bad" not in [j.name for j in observation.scenario.jobs]


def queues_with_users(api, **users):
    items = [{"name": "team-a", "deserved": 8, **users}, {"name": "team-b", "deserved": 8}]
    api.put({"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": names.DEFAULT_NAMESPACE},
             "data": {names.QUEUES_KEY: yaml.safe_dump(items)}})


def test_a_queue_lists_the_namespaces_that_may_use_it(seeded, cluster):
    queues_with_users(seeded, namespaces=["ml"])
    seeded.put(gpu_pod("ml", "mine", labels=team_a()))
    seeded.put(gpu_pod("web", "sneak", labels=team_a()))
    scenario, _ = look(cluster)
    assert scenario.queue("team-a").namespaces == ["ml"] and scenario.namespaces == []
    assert seeded.calls("/api/v1/namespaces") == 0  # names need no namespace labels
    result = plan(scenario)
    assert result.job("ml/mine").action == "start"
    assert (result.job("web/sneak").action, result.job("web/sneak").reason) == (
        "wait", "not admitted: namespace web may not use queue team-a")


def test_a_queue_chooses_its_users_by_namespace_label(seeded, cluster):
    queues_with_users(seeded, namespace_selector={"matchLabels": {"team": "a"}})
    seeded.put({"kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "a"}}})
    seeded.put({"kind": "Namespace", "metadata": {"name": "web", "labels": {"team": "web"}}})
    seeded.put({"kind": "Namespace", "metadata": {"name": "idle", "labels": {"team": "a"}}})
    seeded.put(gpu_pod("ml", "mine", labels=team_a()))
    seeded.put(gpu_pod("web", "sneak", labels=team_a()))
    scenario, _ = look(cluster)
    assert seeded.calls("/api/v1/namespaces", "GET") == 1
    assert [(n.name, n.labels) for n in scenario.namespaces] == [("ml", {"team": "a"}), ("web", {"team": "web"})]
    result = plan(scenario)
    assert result.job("ml/mine").action == "start" and result.job("web/sneak").action == "wait"


def test_a_bad_queue_user_list_names_the_config_map_and_field(seeded, cluster):
    queues_with_users(seeded, namespace_selector={"matchExpressions": []})
    with pytest.raises(ClusterObjectError, match=r"gpu-policy-queues: data.queues.yaml\[0\].namespace_selector"):
        look(cluster)
