"""A DRA cluster as NVIDIA's DRA driver (gpu.nvidia.com) and the resourceclaim controller
write it, for the tests and bench/observe_scale.py: nodes without `nvidia.com/gpu`, one
ResourceSlice pool per node, the DeviceClass `gpu.nvidia.com`, and each GPU pod with its
own ResourceClaim (allocated and reserved when it runs)."""

from __future__ import annotations

from tests.kubernetes.objects import node_object, pod_objects, queues_config_map
from gpu_policy.model import Node, Scenario

DRIVER = "gpu.nvidia.com"
API = "resource.k8s.io/v1"


def serve_dra(api) -> None:
    """resource.k8s.io/v1, as a Kubernetes 1.34 API server serves it."""
    for plural, kind, namespaced in (("resourceslices", "ResourceSlice", False), ("deviceclasses", "DeviceClass", False),
                                     ("resourceclaims", "ResourceClaim", True),
                                     ("resourceclaimtemplates", "ResourceClaimTemplate", True)):
        api.add_resource("resource.k8s.io", "v1", plural, kind, namespaced=namespaced)


def serve_taint_rules(api) -> None:
    """DeviceTaintRules in resource.k8s.io/v1, as Kubernetes 1.37 serves them."""
    api.add_resource("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", namespaced=False)


def serve_pod_groups(api) -> None:
    """PodGroups of KAI-Scheduler, Volcano and the coscheduling plugin."""
    for group, version in (("scheduling.run.ai", "v2alpha2"), ("scheduling.volcano.sh", "v1beta1"),
                           ("scheduling.x-k8s.io", "v1alpha1")):
        api.add_resource(group, version, "podgroups", "PodGroup", namespaced=True)


def taint_rule(name: str, selector: dict | None, key: str = "gpu.nvidia.com/unhealthy",
               effect: str = "NoSchedule") -> dict:
    """A DeviceTaintRule as an admin (or a health monitor) writes it."""
    spec = {"taint": {"key": key, "value": "xid-79", "effect": effect, "timeAdded": "2026-11-26T08:00:00Z"}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": API, "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


def gpu_class() -> dict:
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}' && "
                                                          f"device.attributes['{DRIVER}'].type == 'gpu'"}}]}}


def gpu_device(node: str, i: int, product: str) -> dict:
    return {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{node}-{i}"},
                                               "productName": {"string": product}, "index": {"int": i}}}


def mig_device(node: str, parent: int, k: int, profile: str, product: str) -> dict:
    return {"name": f"gpu-{parent}-mig-{profile}-{k}", "attributes": {
        "type": {"string": "mig"}, "uuid": {"string": f"MIG-{node}-{parent}-{k}"},
        "parentUUID": {"string": f"GPU-{node}-{parent}"}, "profile": {"string": profile},
        "productName": {"string": product}}}


def resource_slice(node: str, devices: list[dict], generation: int = 1, count: int = 1, part: int = 0) -> dict:
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}-g{generation}-{part}"},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": count}}}


def gpu_claim(namespace: str, name: str, count: int, selectors: list[str] = ()) -> dict:
    exactly = {"deviceClassName": "gpu.nvidia.com", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}


def allocate(claim: dict, node: str, devices: list[str], pods: list[tuple[str, str]]) -> dict:
    """The claim as the scheduler leaves it: allocated on `node`, reserved for `pods` (name, uid)."""
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": DRIVER, "pool": node, "device": d} for d in devices]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in pods]}
    return claim


def claiming(pod: dict, claim: str) -> dict:
    """The pod asking for its GPUs through a ResourceClaim instead of nvidia.com/gpu."""
    pod["spec"]["containers"][0]["resources"].pop("limits", None)
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
    return pod


def load_dra(api, s: Scenario, now: float, namespace: str = "jobs", product: str = "NVIDIA A100-SXM4-80GB") -> None:
    """The scenario (whole-GPU jobs) as a DRA-only cluster: every GPU through DRA."""
    serve_dra(api)
    api.put(gpu_class())
    for n in s.nodes:
        obj = node_object(Node(n.name, 0, cpu=n.cpu, memory_gib=n.memory_gib))
        obj["status"]["allocatable"].pop("nvidia.com/gpu")
        api.put(obj)
        api.put(resource_slice(n.name, [gpu_device(n.name, i, product) for i in range(n.gpus)]))
    api.put({"kind": "Namespace", "metadata": {"name": namespace}})
    api.put(queues_config_map(s))
    taken: dict[str, int] = {}
    for job in s.jobs:
        for r, pod in enumerate(pod_objects(job, now, namespace)):
            name = pod["metadata"]["name"]
            pod["metadata"]["uid"] = f"uid-{name}"
            claim = gpu_claim(namespace, f"{name}-gpus", int(job.gpus))
            if job.running:
                node = job.running[r]
                first = taken.get(node, 0)
                taken[node] = first + int(job.gpus)
                allocate(claim, node, [f"gpu-{i}" for i in range(first, first + int(job.gpus))], [(name, f"uid-{name}")])
            api.put(claim)
            api.put(claiming(pod, claim["metadata"]["name"]))
