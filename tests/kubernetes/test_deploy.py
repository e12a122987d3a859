"""deploy/: it renders with kustomize, every object validates against the Kubernetes API of
the versions it is for, the RBAC is exactly the contract's list and covers every request the
code declares, the controller runs hardened from the project's image installing nothing, the
admission policy gates exactly the pods the contract names, deploy/webhook/ installs the webhook
in its place with the same match and only its by-name rights, and the queues example stays out
of `kubectl apply -k`. Each client method sends exactly the request its declaration names
(the fake server's log); every test's requests stay within the declarations."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import gpu_policy
from gpu_policy.cli import build_parser
from gpu_policy.kubernetes import PERMISSIONS, Permission
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.transport.kinds import KINDS
from gpu_policy.kubernetes.names import ADMISSION_GATE, WEBHOOK_CONFIGURATION, WEBHOOK_TLS_SECRET
from gpu_policy.kubernetes.read.queues import queues_from_config_map
from gpu_policy.kubernetes.transport.webhook import WEBHOOK_PERMISSIONS
from tests.kubernetes.admission_cases import DEPLOY, PODS, pod, policy_matches
from tests.kubernetes.dra_objects import serve_dra, serve_pod_groups, serve_taint_rules
from tests.kubernetes.fake.patch import json_patch
from tests.kubernetes.fake_trainer import serve_train_jobs
from tests.kubernetes.objects import attached_request, gpu_pod, serve_composability_requests, serve_kueue_topologies

#: the webhook folders serve every Kubernetes gpu-policy supports (scheduling gates: beta in 1.29, GA in 1.30)
WEBHOOK_VERSIONS = tuple(f"1.{minor}.0" for minor in range(29, 38))
#: what each folder installs, and the Kubernetes versions its objects must validate against
VARIANTS = {"": ("1.36.0", "1.37.0"), "kubernetes-1.35": ("1.34.0", "1.35.0"), "webhook": WEBHOOK_VERSIONS,
            "webhook/cert-manager": WEBHOOK_VERSIONS}
WEBHOOK_VARIANTS = ("webhook", "webhook/cert-manager")
#: kinds of another project's CRDs (cert-manager's), which kubernetes-validate has no schema for
FOREIGN_GROUPS = ("cert-manager.io/",)
#: the contract's list (spec "Permissions"), verb by verb; True: in gpu-policy's namespace only
CONTRACT = {
    ("", "nodes", False): {"get", "list", "watch"},
    ("", "namespaces", False): {"get", "list", "watch"},
    ("", "pods", False): {"get", "list", "watch", "patch"},
    ("", "pods/eviction", False): {"create"},
    ("events.k8s.io", "events", False): {"create", "patch"},
    ("", "configmaps", True): {"get", "list", "watch", "create", "update", "patch"},
    ("coordination.k8s.io", "leases", True): {"get", "create", "update"},
    ("cro.hpsys.ibm.ie.com", "composabilityrequests", False): {"get", "list", "watch", "create", "update", "patch",
                                                               "delete"},
    ("scheduling.run.ai", "queues", False): {"get", "list", "watch"},
    # issue 27: DRA and PodGroups, listed by a look when a GPU pod has resourceClaims or names a
    # PodGroup, and watched by the controller
    **{("resource.k8s.io", plural, False): {"get", "list", "watch"}
       for plural in ("resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses",
                      "devicetaintrules")},
    **{(group, "podgroups", False): {"get", "list", "watch"}
       for group in ("scheduling.run.ai", "scheduling.volcano.sh", "scheduling.x-k8s.io")},
    # issue 43: a TrainJob's numNodes sizes the gang of its pods
    ("trainer.kubeflow.org", "trainjobs", False): {"list", "watch"},
    # issue 39: the levels of a Kueue Topology, when the queues ConfigMap has none
    ("kueue.x-k8s.io", "topologies", False): {"get", "list", "watch"},
}


def kustomize(folder: Path) -> list[dict]:
    """What `kubectl kustomize` renders, for the features deploy/ uses: `resources` (files and
    folders with their own kustomization.yaml), `patches` (inline JSON 6902, by kind and name)
    and `images` (newName, newTag, digest)."""
    spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert set(spec) <= {"apiVersion", "kind", "resources", "patches", "images"}, \
        f"{folder}: a feature this renderer lacks"
    objects = []
    for entry in spec["resources"]:
        path = (folder / entry).resolve()
        objects += kustomize(path) if path.is_dir() else [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in spec.get("patches", []):
        assert set(patch) == {"target", "patch"} and set(patch["target"]) == {"kind", "name"}, folder
        targets = [i for i, o in enumerate(objects)
                   if (o["kind"], o["metadata"]["name"]) == (patch["target"]["kind"], patch["target"]["name"])]
        assert len(targets) == 1, f"{folder}: a patch's target {patch['target']} is not one object"
        objects[targets[0]] = json_patch(objects[targets[0]], yaml.safe_load(patch["patch"]))
    for image in spec.get("images", []):
        new = image.get("newName", image["name"]) + (f"@{image['digest']}" if "digest" in image
                                                     else f":{image['newTag']}" if "newTag" in image else "")
        for obj in objects:
            for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                if container["image"].split("@")[0].split(":")[0] == image["name"]:
                    container["image"] = new
    return objects


def rendered(variant: str = "") -> list[dict]:
    return kustomize(DEPLOY / variant)


def by_kind(kind: str, variant: str = "") -> list[dict]:
    return [m for m in rendered(variant) if m["kind"] == kind]


def ident(obj: dict) -> tuple:
    return obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_kubectl_kustomize_renders_what_the_test_renderer_does(variant):
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (the other tests render with this file's kustomize())")
    out = subprocess.run(["kubectl", "kustomize", str(DEPLOY / variant)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    by_kubectl = {ident(d): d for d in yaml.safe_load_all(out.stdout) if d}
    assert by_kubectl == {ident(d): d for d in rendered(variant)}


def test_every_manifest_is_installed_or_an_example():
    listed = {p for variant in VARIANTS for p in _files(DEPLOY / variant)}
    manifests = {p for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml" and "examples" not in p.parts
                 and _holds_kubernetes_objects(p)}
    assert listed == manifests
    assert len({ident(d) for d in rendered()}) == len(rendered())


def _holds_kubernetes_objects(path: Path) -> bool:
    """Not, e.g., deploy/prometheus's rule file, which Prometheus loads, not Kubernetes."""
    return all("apiVersion" in d and "kind" in d for d in yaml.safe_load_all(path.read_text()) if d)


def _files(folder: Path) -> set[Path]:
    spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
    paths = [(folder / entry).resolve() for entry in spec["resources"]]
    return {q for p in paths for q in (_files(p) if p.is_dir() else {p})}


@pytest.mark.parametrize("variant,version", [(v, k) for v, versions in VARIANTS.items() for k in versions])
def test_every_object_validates_against_the_kubernetes_api(variant, version):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for obj in rendered(variant):
        if not obj["apiVersion"].startswith(FOREIGN_GROUPS):
            kubernetes_validate.validate(obj, version, strict=True)  # raises naming the object and the field


def test_the_validation_is_real():
    """The v1 policy is unknown to 1.34, and a misspelt field is refused: the check can fail."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    (policy,) = by_kind("MutatingAdmissionPolicy")
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(policy, "1.34.0", strict=True)
    (deployment,) = by_kind("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.36.0", strict=True)


def test_the_examples_validate_and_are_never_applied():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for path in (DEPLOY / "examples").glob("*.yaml"):
        for obj in filter(None, yaml.safe_load_all(path.read_text())):
            kubernetes_validate.validate(obj, "1.34.0", strict=True)
            assert all(ident(obj) not in {ident(d) for d in rendered(v)} for v in VARIANTS), path


# -- RBAC -----------------------------------------------------------------------------------------
def granted(variant: str = "") -> set[Permission]:
    out = set()
    for role in by_kind("ClusterRole", variant) + by_kind("Role", variant):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add(Permission(verb, group, resource, own_namespace=role["kind"] == "Role"))
    return out


def contract() -> set[Permission]:
    return {Permission(verb, group, resource, own) for (group, resource, own), verbs in CONTRACT.items()
            for verb in verbs}


def by_name(variant: str) -> tuple[set[Permission], list[dict]]:
    """The grants of the roles named gpu-policy-webhook (by resourceNames), and their rules."""
    roles = [r for r in by_kind("ClusterRole", variant) + by_kind("Role", variant)
             if r["metadata"]["name"] == "gpu-policy-webhook"]
    return ({Permission(verb, group, resource, own_namespace=role["kind"] == "Role")
             for role in roles for rule in role["rules"] for group in rule["apiGroups"]
             for resource in rule["resources"] for verb in rule["verbs"]}, [r for role in roles for r in role["rules"]])


@pytest.mark.parametrize("variant", VARIANTS)
def test_rbac_is_exactly_the_contract_s_list(variant):
    webhook, _ = by_name(variant)
    assert granted(variant) - webhook == contract()
    text = (DEPLOY / "base" / "rbac.yaml").read_text()
    assert "*" not in text and "secrets" not in text
    assert [r["metadata"]["namespace"] for r in by_kind("Role", variant)] == \
           ["gpu-policy"] * (2 if variant in WEBHOOK_VARIANTS else 1)


def test_the_webhook_s_rights_are_the_contract_s_by_name_and_declared_by_the_code():
    """Self-signed: the Secret get/update, the configuration get/patch, each by its name, exactly
    what the code declares; with cert-manager only the Secret's get (cert-manager writes the rest)."""
    grants, rules = by_name("webhook")
    assert grants == WEBHOOK_PERMISSIONS == {
        Permission("get", "", "secrets", True), Permission("update", "", "secrets", True),
        Permission("get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        Permission("patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations")}
    assert sorted(r["resourceNames"] for r in rules) == [[WEBHOOK_CONFIGURATION], [WEBHOOK_TLS_SECRET]]
    grants, rules = by_name("webhook/cert-manager")
    assert grants == {Permission("get", "", "secrets", True)}
    assert [r["resourceNames"] for r in rules] == [[WEBHOOK_TLS_SECRET]]


def test_every_request_the_code_declares_is_granted():
    assert PERMISSIONS <= granted()


def controller_landed() -> bool:
    return "controller" in build_parser()._subparsers._group_actions[0].choices


#: what the contract grants but no request of the code sends (docs/kubernetes.md, "Permissions"):
#: when the code starts sending one, it leaves this set
CONTRACT_ONLY = {Permission("get", "", "nodes"), Permission("get", "", "namespaces"),
                 Permission("get", "scheduling.run.ai", "queues"), Permission("get", "kueue.x-k8s.io", "topologies"),
                 Permission("update", "cro.hpsys.ibm.ie.com", "composabilityrequests"),
                 Permission("patch", "", "configmaps", own_namespace=True),
                 *(Permission("get", "resource.k8s.io", plural) for plural in (
                     "resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses", "devicetaintrules")),
                 *(Permission("get", group, "podgroups")
                   for group in ("scheduling.run.ai", "scheduling.volcano.sh", "scheduling.x-k8s.io"))}


@pytest.mark.skipif(not controller_landed(), reason="the controller (`gpu-policy controller`) has not landed")
def test_every_grant_but_the_contract_s_spare_ones_is_declared_by_the_code():
    assert granted() - PERMISSIONS == CONTRACT_ONLY


@pytest.mark.parametrize("variant", VARIANTS)
def test_bindings_give_the_roles_to_gpu_policy_s_account(variant):
    account = by_kind("ServiceAccount", variant)[0]["metadata"]
    for binding in by_kind("ClusterRoleBinding", variant) + by_kind("RoleBinding", variant):
        assert binding["roleRef"]["name"] == binding["metadata"]["name"] in ("gpu-policy", "gpu-policy-webhook")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                        "namespace": account["namespace"]}]
    (deployment,) = by_kind("Deployment", variant)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]


# -- the controller ------------------------------------------------------------------------------
def controller_container(variant: str = "") -> tuple[dict, dict]:
    (deployment,) = by_kind("Deployment", variant)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_the_controller_runs_the_project_s_image_and_installs_nothing():
    pod, container = controller_container()
    assert container["image"] == gpu_policy.DEFAULT_IMAGE  # make image's default, pinned by kustomize's images:
    assert container["command"] == ["gpu-policy", "controller"]  # the image's console script, no shell
    assert not pod.get("initContainers")
    words = " ".join(container["command"] + container["args"])
    assert not any(w in words for w in ("pip", "install", "sh -c", "apt"))


@pytest.mark.skipif(not controller_landed(), reason="the controller (`gpu-policy controller`) has not landed")
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_controller_s_arguments_are_the_cli_s(variant):
    _, container = controller_container(variant)
    args = build_parser().parse_args(container["command"][1:] + container["args"])
    assert args.command == "controller"
    assert args.webhook == (variant in WEBHOOK_VARIANTS)
    if args.webhook:
        assert args.webhook_certificates == ("cert-manager" if "cert-manager" in variant else "self-signed")
        assert {"name": "webhook", "containerPort": args.webhook_port} in container["ports"]


@pytest.mark.parametrize("variant", WEBHOOK_VARIANTS)
def test_the_webhook_is_the_policy_s_mutation_for_older_kubernetes(variant):
    """Pod CREATEs in managed namespaces, the policy's match conditions word for word, refused
    when it cannot be called, 5 s; the Service reaches the controller's webhook port; no
    MutatingAdmissionPolicy beside it."""
    objects = rendered(variant)
    assert not [o for o in objects if o["kind"].startswith("MutatingAdmissionPolicy")]
    (configuration,) = [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    (hook,) = configuration["webhooks"]
    policy, binding = policies()[""]
    assert configuration["metadata"]["name"] == WEBHOOK_CONFIGURATION
    assert hook["rules"] == [dict(r, scope="Namespaced") for r in policy["spec"]["matchConstraints"]["resourceRules"]]
    assert hook["namespaceSelector"] == binding["spec"]["matchResources"]["namespaceSelector"]
    assert hook["matchConditions"] == policy["spec"]["matchConditions"]
    assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"]) == ("Fail", "None", 5)
    assert hook["admissionReviewVersions"] == ["v1"]
    service = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "gpu-policy-webhook")
    assert hook["clientConfig"]["service"] == {"name": "gpu-policy-webhook", "namespace": "gpu-policy",
                                               "path": "/mutate-pods", "port": 443}
    assert service["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook"}]
    (deployment,) = by_kind("Deployment", variant)
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    secrets = [o for o in objects if o["kind"] == "Secret"]
    if "cert-manager" in variant:  # cert-manager writes the Secret and injects the CA
        assert not secrets
        assert configuration["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from":
                                                            "gpu-policy/gpu-policy-webhook"}
        (certificate,) = [o for o in objects if o["kind"] == "Certificate"]
        assert certificate["spec"]["secretName"] == WEBHOOK_TLS_SECRET
        assert "gpu-policy-webhook.gpu-policy.svc" in certificate["spec"]["dnsNames"]
    else:  # created empty, filled by the controller
        assert [(s["metadata"]["name"], s["type"], s["data"]) for s in secrets] == [
            (WEBHOOK_TLS_SECRET, "kubernetes.io/tls", {"tls.crt": "", "tls.key": "", "ca.crt": ""})]


def test_the_controller_is_hardened():
    pod, container = controller_container()
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert "USER 10001:10001" in (DEPLOY.parent / "Dockerfile").read_text()  # the uid the pod runs as
    writable = {m["mountPath"] for m in container["volumeMounts"]}
    assert writable == {"/tmp"} and {v["name"] for v in pod["volumes"]} == {"tmp"}


def test_the_controller_has_two_replicas_probes_and_measured_requests():
    (deployment,) = by_kind("Deployment")
    assert deployment["spec"]["replicas"] == 2
    _, container = controller_container()
    args = container["args"]
    port = int(args[args.index("--metrics-port") + 1])
    assert container["ports"] == [{"name": "metrics", "containerPort": port}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    resources = container["resources"]
    assert resources["requests"]["memory"] and resources["limits"]["memory"] and "cpu" not in resources["limits"]
    (budget,) = by_kind("PodDisruptionBudget")
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]


# -- admission ------------------------------------------------------------------------------------
def policies() -> dict[str, list[dict]]:
    return {v: [o for o in rendered(v) if o["kind"].startswith("MutatingAdmissionPolicy")] for v in VARIANTS}


def test_the_v1_and_v1beta1_policies_say_the_same():
    found = policies()
    assert [o["apiVersion"] for o in found[""]] == ["admissionregistration.k8s.io/v1"] * 2
    assert [o["apiVersion"] for o in found["kubernetes-1.35"]] == ["admissionregistration.k8s.io/v1beta1"] * 2
    assert [(o["kind"], o["metadata"], o["spec"]) for o in found[""]] == \
           [(o["kind"], o["metadata"], o["spec"]) for o in found["kubernetes-1.35"]]


def test_the_policy_adds_only_our_gate_in_managed_namespaces():
    policy, binding = policies()[""]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"gpu-policy.io/managed": "true"}}
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    (mutation,) = policy["spec"]["mutations"]
    assert mutation["patchType"] == "ApplyConfiguration"
    assert mutation["applyConfiguration"]["expression"] == (
        'Object{spec: Object.spec{schedulingGates: [Object.spec.schedulingGates{name: "%s"}]}}' % ADMISSION_GATE)


@pytest.mark.parametrize("case", PODS)
def test_the_policy_matches_exactly_the_contract_s_pods(case):
    """The match conditions evaluated by a CEL interpreter (cel-python) on the pods of each kind."""
    pytest.importorskip("celpy")
    results = policy_matches(pod(case))
    assert all(results) == PODS[case][2], results


def test_the_queues_example_is_valid():
    (config_map,) = [d for d in yaml.safe_load_all((DEPLOY / "examples" / "queues.yaml").read_text()) if d]
    assert [q.name for q in queues_from_config_map(config_map)] == ["research", "team-a", "team-b", "inference"]


# -- the client's declared requests --------------------------------------------------------------
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
        "list_device_taint_rules": lambda: client.list_device_taint_rules(),
        "list_volcano_pod_groups": lambda: client.list_volcano_pod_groups(),
        "list_coscheduling_pod_groups": lambda: client.list_coscheduling_pod_groups(),
        "list_train_jobs": lambda: client.list_train_jobs(),
        "list_kueue_topologies": lambda: client.list_kueue_topologies(),
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
        "patch_pod_json": lambda: client.patch_pod_json("ml", "p", [{"op": "test", "path": "/kind", "value": "Pod"}]),
        "create_event": lambda: client.create_event("ml", {"metadata": {"name": "e"},
                                                           "eventTime": "2026-01-01T00:00:00.000000Z"}),
        "patch_event": lambda: client.patch_event("ml", "e", {"series": {"count": 2}}),
    }


def test_each_client_method_sends_exactly_its_declared_request(api, cluster):
    api.put(gpu_pod("ml", "p", node="n"))
    serve_composability_requests(api)
    serve_dra(api)
    serve_taint_rules(api)
    serve_pod_groups(api)
    serve_train_jobs(api)
    serve_kueue_topologies(api)
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
    kinds = {}
    for kind, row in KINDS.items():  # the watched kinds: each LIST and WATCH sends its declared request
        for verb, call in (("list", lambda: client.list_kind(kind)), ("watch", lambda: list(client.watch(kind, "1", 1)))):
            api.reset_log()
            call()
            assert api.permissions_used() == {(verb, row.group, row.resource)}, (verb, kind)
            own = {r.path.split("/namespaces/")[1].split("/")[0] for r in api.requests if "/namespaces/" in r.path}
            assert own <= ({"gpu-policy"} if row.own_namespace else set()), (verb, kind)
            kinds[verb, kind] = Permission(verb, row.group, row.resource, row.own_namespace)
    assert {getattr(KubeClient, name).permission for name in methods} | set(kinds.values()) == PERMISSIONS
