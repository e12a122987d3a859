"""deploy/: every manifest parses, kustomize lists them all, and the RBAC is exactly what
the code calls: the manifests grant the declared permissions and nothing else, and each
client method sends exactly the request its declaration names (the fake server's log).
Every test's requests stay within the declarations (checked when its fake server stops)."""

from pathlib import Path

import pytest
import yaml

import gpu_policy
from gpu_policy.kubernetes import PERMISSIONS, Permission
from gpu_policy.kubernetes.client import KubeClient
from gpu_policy.kubernetes.queues import queues_from_config_map
from tests.kubernetes.objects import attached_request, gpu_pod, serve_composability_requests

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def manifests() -> list[dict]:
    return [doc for path in sorted(DEPLOY.glob("*.yaml")) if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(kind: str) -> list[dict]:
    return [m for m in manifests() if m["kind"] == kind]


def test_kustomize_lists_every_manifest():
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    assert all(m["apiVersion"] and m["kind"] and m["metadata"]["name"] for m in manifests())


def granted() -> set[Permission]:
    out = set()
    for role in by_kind("ClusterRole") + by_kind("Role"):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add(Permission(verb, group, resource, own_namespace=role["kind"] == "Role"))
    return out


def test_rbac_is_exactly_what_the_code_declares():
    assert granted() == PERMISSIONS
    text = (DEPLOY / "rbac.yaml").read_text()
    assert "*" not in text and "secrets" not in text
    assert [r["metadata"]["namespace"] for r in by_kind("Role")] == ["gpu-policy"]


def test_bindings_give_the_roles_to_gpu_policy_s_account():
    account = by_kind("ServiceAccount")[0]["metadata"]
    for binding in by_kind("ClusterRoleBinding") + by_kind("RoleBinding"):
        assert binding["roleRef"]["name"] == "gpu-policy"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                        "namespace": account["namespace"]}]
    (deployment,) = by_kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["name"]
    assert f"gpu-policy=={gpu_policy.__version__} " in pod["containers"][0]["args"][0]
    assert "gpu-policy reconcile --cluster k8s://" in pod["containers"][0]["args"][0]


def test_the_queue_example_is_valid():
    (config_map,) = by_kind("ConfigMap")
    assert [q.name for q in queues_from_config_map(config_map)] == ["research", "team-a", "team-b", "inference"]


def calls(client: KubeClient) -> dict:
    """One call of every client method, with arguments that suit the fake cluster."""
    return {
        "list_nodes": lambda: client.list_nodes(), "list_pods": lambda: client.list_pods(),
        "list_namespaces": lambda: client.list_namespaces(), "list_kai_queues": lambda: client.list_kai_queues(),
        "list_kai_pod_groups": lambda: client.list_kai_pod_groups(),
        "list_resource_slices": lambda: client.list_resource_slices(),
        "list_resource_claims": lambda: client.list_resource_claims(),
        "list_resource_claim_templates": lambda: client.list_resource_claim_templates(),
        "list_device_classes": lambda: client.list_device_classes(),
        "list_volcano_pod_groups": lambda: client.list_volcano_pod_groups(),
        "list_coscheduling_pod_groups": lambda: client.list_coscheduling_pod_groups(),
        "read_config_map": lambda: client.read_config_map("gpu-policy-queues"),
        "create_config_map": lambda: client.create_config_map("x", {"a": "b"}),
        "replace_config_map": lambda: client.replace_config_map("x", {"a": "c"}, "1"),
        "read_lease": lambda: client.read_lease("l"),
        "create_lease": lambda: client.create_lease("l", {"holderIdentity": "me", "leaseDurationSeconds": 5}),
        "replace_lease": lambda: client.replace_lease("l", {"holderIdentity": None}, "1"),
        "read_pod": lambda: client.read_pod("ml", "p"),
        "patch_pod_metadata": lambda: client.patch_pod_metadata("ml", "p", {"a": "b"}),
        "evict_pod": lambda: client.evict_pod("ml", "p"),
        "list_composability_requests": lambda: client.list_composability_requests(),
        "read_composability_request": lambda: client.read_composability_request("r"),
        "create_composability_request": lambda: client.create_composability_request(
            attached_request("n", "m", 1), deadline_s=1),
        "patch_composability_request": lambda: client.patch_composability_request("r", {"spec": {}}, deadline_s=1),
        "delete_composability_request": lambda: client.delete_composability_request("r"),
    }


def test_each_client_method_sends_exactly_its_declared_request(api, cluster):
    api.put(gpu_pod("ml", "p", node="n"))
    serve_composability_requests(api)
    client = cluster().client
    methods = {name for name in dir(KubeClient) if hasattr(getattr(KubeClient, name), "permission")}
    assert methods == set(calls(client))
    for name, call in calls(client).items():
        api.reset_log()
        call()
        permission = getattr(KubeClient, name).permission
        assert api.permissions_used() == {(permission.verb, permission.group, permission.resource)}, name
        own = {r.path.split("/namespaces/")[1].split("/")[0] for r in api.requests if "/namespaces/" in r.path}
        assert own <= ({"gpu-policy"} if permission.own_namespace else {"ml"}), name
    assert {getattr(KubeClient, name).permission for name in methods} == PERMISSIONS


@pytest.mark.parametrize("verb,resource", [("get", "nodes"), ("get", "namespaces"), ("patch", "configmaps"),
                                           ("watch", "composabilityrequests"), ("update", "composabilityrequests")])
def test_what_the_spec_allows_but_the_code_never_needs_is_not_granted(verb, resource):
    assert not {p for p in granted() if (p.verb, p.resource) == (verb, resource)}
