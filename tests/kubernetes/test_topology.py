"""Topology on a cluster (docs/topology.md, "On a cluster"): the levels from a Kueue Topology
(v1beta2, else v1beta1) or the queues ConfigMap's topology.yaml, each pod's request from any
of the three annotation sets, and the controller releasing a gang into one domain."""

import pytest
import yaml

from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.pod_view import TopologyAsk
from gpu_policy.kubernetes.read.pods import read_pod
from gpu_policy.kubernetes.read.topology import Hierarchy, levels_from_kueue, with_topology
from gpu_policy.model import JobTopology, TopologyLevel
from tests.kubernetes.controller_harness import (cluster_of, gated_pod, new_controller, not_admitted_note, released,
                                                 settle)
from tests.kubernetes.objects import gpu_pod, kueue_topology, serve_kueue_topologies

BLOCK, RACK = "example.com/block", "example.com/rack"
#: 12 nodes of 8 GPUs, three racks of four (r1: n1-n4, r2: n5-n8, r3: n9-n12) in two blocks
RACKS = {f"n{i}": {BLOCK: "b1" if i <= 8 else "b2", RACK: f"r{(i - 1) // 4 + 1}"} for i in range(1, 13)}
KUEUE_LEVELS = [BLOCK, RACK, names.HOSTNAME_LABEL]
#: how each annotation set asks for one rack (KAI's names the Topology its levels are of)
ASKS = {
    "kueue": {"kueue.x-k8s.io/podset-required-topology": RACK},
    "kai": {"kai.scheduler/topology-required-placement": RACK, names.KAI_TOPOLOGY_ANNOTATION: "default"},
    "gpu-policy": {"gpu-policy.io/topology-required": RACK},
}


def racked_cluster(api, versions=names.KUEUE_TOPOLOGY_VERSIONS, topology: list[str] | None = KUEUE_LEVELS) -> None:
    """RACKS with a node of r1 and one of r3 half busy: only r2 has four whole nodes free."""
    cluster_of(api, nodes=12, queues=[{"name": "a", "deserved": 96}], labels=RACKS)
    serve_kueue_topologies(api, versions)
    if topology is not None:
        api.put(kueue_topology("default", topology, versions[0]))
    for busy in ("n1", "n9"):
        api.put(gpu_pod("jobs", f"busy-{busy}", 4, node=busy, labels={names.QUEUE_LABEL: "a"}))


def gang(name: str, notes: dict, replicas: int = 4, gpus: int = 8) -> list[dict]:
    pods = []
    for i in range(replicas):
        pod = gated_pod(f"{name}-{i}", "a", gpus=gpus, job=name, replicas=replicas)
        pod["metadata"]["annotations"].update(notes)
        pods.append(pod)
    return pods


def racks_of(api, pods: dict[str, str]) -> set[str]:
    return {RACKS[node][RACK] for node in pods.values()}


@pytest.mark.parametrize("written", sorted(ASKS))
def test_a_4x8_gang_asking_for_a_rack_is_released_into_one_rack(api, cluster, fake_time, written):
    racked_cluster(api)
    for pod in gang("train", ASKS[written]):
        api.put(pod)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(released(api)) == 4)
        assert racks_of(api, released(api)) == {"r2"}  # the one rack with four whole nodes free
    finally:
        c.stop.set()


def test_without_a_request_the_same_gang_may_span_racks(api, cluster, fake_time):
    """The control: the rack above is the request's doing, not the packing's."""
    racked_cluster(api)
    for pod in gang("train", {}):
        api.put(pod)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(released(api)) == 4)
        assert len(racks_of(api, released(api))) > 1
    finally:
        c.stop.set()


def test_a_kueue_0_14_cluster_serves_the_topology_at_v1beta1_only(api, cluster, fake_time):
    racked_cluster(api, versions=("v1beta1",))
    for pod in gang("train", ASKS["kueue"]):
        api.put(pod)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(released(api)) == 4)
        assert racks_of(api, released(api)) == {"r2"}
        assert any("/kueue.x-k8s.io/v1beta2/topologies" in r.path and r.status == 404 for r in api.requests)
    finally:
        c.stop.set()


def test_a_label_that_is_no_level_leaves_that_pod_out_with_a_warning_event(api, cluster, fake_time):
    racked_cluster(api)
    wrong = gated_pod("wrong", "a", gpus=1)
    wrong["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = "example.com/row"
    api.put(wrong)
    api.put(gated_pod("plain", "a", gpus=1))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: "plain" in released(api))
        settle(c, fake_time)
        assert "wrong" not in released(api)
        note = not_admitted_note(api, "jobs", "wrong")
        assert "metadata.annotations.kueue.x-k8s.io/podset-required-topology" in note
        assert '"example.com/row"' in note and RACK in note, note
    finally:
        c.stop.set()


def test_a_new_topology_object_re_plans(api, cluster, fake_time):
    """The controller watches Kueue's Topologies: the gang waits while no Topology has its level,
    and is released once one does."""
    racked_cluster(api, topology=None)
    for pod in gang("train", ASKS["kueue"]):
        api.put(pod)
    c = new_controller(cluster)
    try:
        settle(c, fake_time)
        assert released(api) == {}
        api.put(kueue_topology("default", KUEUE_LEVELS))
        settle(c, fake_time, lambda: len(released(api)) == 4)
        assert racks_of(api, released(api)) == {"r2"}
    finally:
        c.stop.set()


def test_a_gang_asking_for_an_nvlink_clique_gets_one(api, cluster, fake_time):
    """GB200 NVL72-like: two cliques of four 8-GPU nodes, the first with one node half busy."""
    cliques = {f"n{i}": {names.CLIQUE_LABEL: f"cluster-a.{(i - 1) // 4}"} for i in range(1, 9)}
    cluster_of(api, nodes=8, queues=[{"name": "a", "deserved": 64}], labels=cliques)
    serve_kueue_topologies(api)
    api.put(kueue_topology("nvl", [names.CLIQUE_LABEL, names.HOSTNAME_LABEL]))
    api.put(gpu_pod("jobs", "busy", 4, node="n2", labels={names.QUEUE_LABEL: "a"}))
    for pod in gang("train", {"gpu-policy.io/topology-required": names.CLIQUE_LABEL}):
        api.put(pod)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(released(api)) == 4)
        assert sorted(released(api).values()) == ["n5", "n6", "n7", "n8"]
    finally:
        c.stop.set()


# -- reading, without a controller ---------------------------------------------------------------
def test_the_three_sets_map_to_level_names_gpu_policy_s_own_first():
    pod = gpu_pod("jobs", "p", 8, annotations={"kueue.x-k8s.io/podset-required-topology": RACK,
                                                "kai.scheduler/topology-required-placement": BLOCK,
                                                "kai.scheduler/topology-preferred-placement": "host"})
    view = read_pod(pod, "nvidia.com/gpu")
    assert view.topology_ask == TopologyAsk(("kueue.x-k8s.io/podset-required-topology", RACK),
                                            ("kai.scheduler/topology-preferred-placement", "host"))
    levels = [TopologyLevel("block", BLOCK), TopologyLevel("rack", RACK), TopologyLevel("host", names.HOSTNAME_LABEL)]
    read, bad, warning = with_topology(view, Hierarchy(levels, "the test"))
    assert read.topology == JobTopology(required="rack", preferred="host") and bad is None and warning is None


def test_a_preferred_level_not_narrower_than_the_required_is_an_error_on_the_pod():
    pod = gated_pod("p", "a", gpus=8)
    pod["metadata"]["annotations"].update({"gpu-policy.io/topology-required": RACK,
                                           "gpu-policy.io/topology-preferred": BLOCK})
    levels = levels_from_kueue(kueue_topology("default", KUEUE_LEVELS))
    kept, bad, _ = with_topology(read_pod(pod, "nvidia.com/gpu"), Hierarchy(levels, "Kueue Topology default"))
    assert kept is None and "narrower than the required" in bad.line()


def test_a_bound_pod_whose_request_cannot_be_read_is_planned_without_it():
    """Leaving out a running pod would hide the GPUs it holds."""
    pod = gpu_pod("jobs", "p", 8, node="n1", annotations={"gpu-policy.io/topology-required": "row"})
    kept, bad, warning = with_topology(read_pod(pod, "nvidia.com/gpu"), Hierarchy([TopologyLevel("rack", RACK)],
                                                                                  "the test"))
    assert kept.topology is None and bad is None and "planned without its topology request" in warning


def test_the_snapshot_carries_the_levels_and_the_requests(api, kubeconfig, capsys):
    racked_cluster(api)
    for pod in gang("train", ASKS["kai"], replicas=2):
        api.put(pod)
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    assert data["topology"] == [{"name": label, "label": label} for label in KUEUE_LEVELS]
    (job,) = [j for j in data["jobs"] if j["name"] == "jobs/train"]
    assert job["topology"] == {"required": RACK}
    assert {n["name"]: n["labels"] for n in data["nodes"]}["n5"] == RACKS["n5"]


def test_the_pods_of_a_gang_must_agree_on_their_topology(api, kubeconfig, capsys):
    racked_cluster(api)
    pods = gang("train", ASKS["kueue"], replicas=2)
    pods[1]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = BLOCK
    for pod in pods:
        api.put(pod)
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 0
    out, err = capsys.readouterr()
    assert "asks for topology required example.com/block" in err and "counted as unmanaged" in err, err


def test_several_topologies_and_none_chosen_is_a_warning_and_no_levels(api, kubeconfig, capsys):
    racked_cluster(api)
    api.put(kueue_topology("other", [RACK]))
    api.put(gang("train", ASKS["kueue"], replicas=1)[0])
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 0
    out, err = capsys.readouterr()
    assert "2 Kueue Topologies (default, other)" in err and "--topology" in err
    assert not yaml.safe_load(out).get("topology")
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--topology", "other"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["topology"] == [{"name": RACK, "label": RACK}]


@pytest.mark.parametrize("argv,message", [
    (["--topology", "nope"], "gpu-policy: Topology nope: does not exist (--topology names it); the cluster's Kueue "
                             "Topologies: default"),
    (["--topology", "Bad_Name"], None),
])
def test_topology_names_are_checked(api, kubeconfig, capsys, argv, message):
    racked_cluster(api)
    code = main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig, *argv])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert message is None or err.strip() == message


@pytest.mark.parametrize("text,message", [
    ("- {name: rack}", "data.topology.yaml[0].label"),
    ("rack: example.com/rack", "data.topology.yaml: must be a list of levels, got dict"),
])
def test_a_bad_topology_yaml_is_one_line_naming_the_config_map_and_field(api, kubeconfig, capsys, text, message):
    racked_cluster(api)
    queues = api.objects("configmaps", names.DEFAULT_NAMESPACE)[0]
    queues["data"][names.TOPOLOGY_KEY] = text
    api.put(queues)
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu-policy: ConfigMap gpu-policy/gpu-policy-queues: " + message) and err.count("\n") == 1, err


def test_a_bad_kueue_topology_is_one_line_naming_the_object_and_field(api, kubeconfig, capsys):
    racked_cluster(api, topology=[RACK, RACK])
    api.put(gang("train", ASKS["kueue"], replicas=1)[0])
    assert main(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu-policy: Topology default: spec.levels[1].nodeLabel") and err.count("\n") == 1, err


def test_topology_applies_to_k8s_clusters_only(capsys):
    scenario = "tests/scenarios/topology-required-rack-fits.yaml"
    assert main(["plan", "--cluster", scenario, "--topology", "default"]) == 2
    assert capsys.readouterr().err == f"gpu-policy: --topology: applies to k8s:// clusters only, not to {scenario}\n"
