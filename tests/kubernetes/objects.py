"""Any scenario as Kubernetes objects, per the contract (docs/kubernetes.md): the test
helper that loads a fake cluster. Reading them back (`snapshot`) must give the scenario.

Jobs go to one namespace (default "jobs") with the pod label `gpu-policy.io/queue`, one
pod per replica, all carrying the label `gpu-policy.io/job` (and a job's topology levels in
gpu-policy's annotations); queues, the policy and the topology levels go to the
`gpu-policy-queues` ConfigMap, the queues' usage to `gpu-policy-usage`.
"""

from __future__ import annotations

from datetime import datetime, timezone

import yaml

from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.clocks import stamp
from gpu_policy.model import Job, Node, Scenario
from gpu_policy.model.scenario_dump import scenario_to_dict


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity_gib(value: float) -> str:
    mib = round(value * 1024)
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def node_object(n: Node, ready: bool = True) -> dict:
    """The node as the kubelet, NVIDIA's device plugin and GPU feature discovery show it: a
    shared node offers `replicas` devices per GPU, and GFD labels its count and sharing; a MIG
    node (the `mixed` strategy) offers its slices as `nvidia.com/mig-<profile>`."""
    sharing = n.gpu_sharing
    allocatable = {"nvidia.com/gpu": "0" if n.mig else str(n.gpus * (sharing.replicas if sharing else 1))}
    allocatable.update({f"nvidia.com/mig-{profile}": str(count) for profile, count in n.mig.items()})
    if n.cpu is not None:
        allocatable["cpu"] = f"{round(n.cpu * 1000)}m"
    if n.memory_gib is not None:
        allocatable["memory"] = quantity_gib(n.memory_gib)
    labels = {names.HOSTNAME_LABEL: n.name, **{k: v for k, v in n.labels.items() if k != names.NO_NEW_WORK_LABEL}}
    if n.gpu_model:
        labels[names.GPU_PRODUCT_LABEL] = n.gpu_model + ("-SHARED" if sharing else "")
    if n.mig:
        labels.update({"nvidia.com/gpu.count": str(n.gpus), "nvidia.com/mig.strategy": "mixed",
                       "nvidia.com/mig.config": "custom-config"})
    if sharing:
        labels.update({"nvidia.com/gpu.count": str(n.gpus), "nvidia.com/gpu.replicas": str(sharing.replicas),
                       "nvidia.com/gpu.sharing-strategy": sharing.strategy})
    meta = {"name": n.name, "labels": labels}
    if n.unhealthy_gpus:
        meta["annotations"] = {names.UNHEALTHY_GPUS_ANNOTATION: ",".join(map(str, n.unhealthy_gpus))}
    taints = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}] + [dict(t) for t in n.taints]
    return {"kind": "Node", "metadata": meta, "spec": {"taints": taints},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def composable_node_object(n: Node, max_gpus: int) -> dict:
    """A node labelled composable, with its most GPUs in the max-gpus annotation."""
    obj = node_object(n)
    obj["metadata"]["labels"][names.COMPOSABLE_LABEL] = "true"
    obj["metadata"].setdefault("annotations", {})[names.MAX_GPUS_ANNOTATION] = str(max_gpus)
    return obj


def composable_config_map(settings: dict, namespace: str = names.DEFAULT_NAMESPACE) -> dict:
    return {"kind": "ConfigMap", "metadata": {"name": names.COMPOSABLE_CONFIGMAP, "namespace": namespace},
            "data": {names.COMPOSABLE_KEY: yaml.safe_dump(settings, sort_keys=False)}}


def attached_request(node: str, model: str, size: int, ours: bool = True, requested_at: float = 1.767e9) -> dict:
    """A ComposabilityRequest the operator has carried out: Running, `size` devices Online
    (gpu-policy's own: its size changed at `requested_at`, from 0)."""
    from gpu_policy.kubernetes.read.requests import request_name

    devices = {f"gpu-{node}-{i}": {"state": "Online", "node_name": node, "device_id": f"GPU-{node}-{i}"}
               for i in range(size)}
    resource = {"type": "gpu", "model": model, "size": size, "target_node": node, "allocation_policy": "samenode"}
    labels = {names.MANAGED_BY_LABEL: names.MANAGED_BY} if ours else {}
    return {"apiVersion": f"{names.CRO_GROUP}/{names.CRO_VERSION}", "kind": names.CRO_KIND,
            "metadata": {"name": request_name(node, model) if ours else f"by-hand-{node}", "labels": labels,
                         "annotations": {names.REQUESTED_AT_ANNOTATION: rfc3339(requested_at),
                                         names.PREVIOUS_SIZE_ANNOTATION: "0"} if ours else {},
                         "finalizers": ["com.ie.ibm.hpsys/finalizer"]},
            "spec": {"resource": resource},
            "status": {"state": "Running", "resources": devices, "scalarResource": dict(resource)}}


def serve_composability_requests(api) -> None:
    """The CDI operator's CRD, without its controller: requests stay as they are put."""
    api.add_resource(names.CRO_GROUP, names.CRO_VERSION, names.CRO_PLURAL, names.CRO_KIND, namespaced=False)


def queues_config_map(s: Scenario, namespace: str = names.DEFAULT_NAMESPACE) -> dict:
    """The queues, the policy and the topology levels (the queues' usage: `usage_config_map`)."""
    written = scenario_to_dict(s)
    queues = [{k: v for k, v in q.items() if k != "usage_gpu_h"} for q in written["queues"]]
    data = {names.QUEUES_KEY: yaml.safe_dump(queues, sort_keys=False)}
    if "policy" in written:
        data[names.POLICY_KEY] = yaml.safe_dump(written["policy"], sort_keys=False)
    if "topology" in written:
        data[names.TOPOLOGY_KEY] = yaml.safe_dump(written["topology"], sort_keys=False)
    return {"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP, "namespace": namespace}, "data": data}


def usage_config_map(usage: dict[str, float], at: float, namespace: str = names.DEFAULT_NAMESPACE) -> dict:
    """The leader's usage history: each queue's GPU-hours as they were at `at`."""
    entries = {queue: {"gpu_h": gpu_h, "at": stamp(at)} for queue, gpu_h in usage.items()}
    return {"kind": "ConfigMap", "metadata": {"name": names.USAGE_CONFIGMAP, "namespace": namespace},
            "data": {names.USAGE_KEY: yaml.safe_dump(entries, sort_keys=False)}}


def pod_objects(job: Job, now: float, namespace: str = "jobs", shared: dict[str, int] | None = None) -> list[dict]:
    """One pod per replica of the job; a job named NAMESPACE/NAME goes to its own namespace.
    `shared`: node -> replicas per GPU of the shared nodes; a fraction there (or, waiting, in a
    cluster that has them) asks for its replicas of a GPU."""
    pods, shared = [], shared or {}
    prefix, slash, short = job.name.partition("/")
    namespace, name = (prefix, short) if slash else (namespace, job.name)
    for r in range(job.replicas):
        replicas = shared.get(job.running[r]) if job.running else min(shared.values(), default=None)
        labels = {names.QUEUE_LABEL: job.queue, names.JOB_LABEL: name}
        if job.preemptible is not None:
            labels[names.PREEMPTIBLE_LABEL] = "true" if job.preemptible else "false"
        notes = {**_checkpointing(job), **_topology(job)}
        resources: dict = {}
        if job.mig_profile:
            resources = {"limits": {f"nvidia.com/mig-{job.mig_profile}": "1"}}
        elif job.is_fractional and replicas and float(job.gpus * replicas).is_integer():
            resource = "nvidia.com/gpu" if job.running else "nvidia.com/gpu" + names.SHARED_RESOURCE_SUFFIX
            resources = {"limits": {resource: str(int(job.gpus * replicas))}}
        elif job.is_fractional:
            notes[names.FRACTION_ANNOTATION] = f"{job.gpus:g}"
        else:
            resources = {"limits": {"nvidia.com/gpu": str(int(job.gpus))}}
        requests = {}
        if job.cpu is not None:
            requests["cpu"] = f"{round(job.cpu * 1000)}m"
        if job.memory_gib is not None:
            requests["memory"] = quantity_gib(job.memory_gib)
        if requests:
            resources["requests"] = requests
        spec: dict = {"containers": [{"name": "train", "image": "python:3.11-slim", "resources": resources}],
                      "priority": job.priority, "terminationGracePeriodSeconds": 30}
        if job.gpu_model and len(job.gpu_model) == 1:
            spec["nodeSelector"] = {names.GPU_PRODUCT_LABEL: job.gpu_model[0]}
        elif job.gpu_model:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": names.GPU_PRODUCT_LABEL, "operator": "In", "values": job.gpu_model}]}]}}}
        _constraints(spec, job)
        status = {"phase": "Pending"}
        if job.running:
            spec["nodeName"] = job.running[r]
            status = {"phase": "Running"}
            if job.gpu_indices is not None:
                notes[names.GPU_INDEX_ANNOTATION] = ",".join(map(str, job.gpu_indices[r]))
            if job.checkpoint_age_s is not None:
                notes[names.LAST_CHECKPOINT_ANNOTATION] = rfc3339(now - job.checkpoint_age_s)
            if job.running_for_s is not None:
                status["startTime"] = rfc3339(now - job.running_for_s)
        # a waiting job's age is its pods' (the mapping reads both from creationTimestamp)
        created = now - job.waiting_for_s if job.waiting_for_s is not None and not job.running else job.submitted_at
        meta = {"name": f"{name}-{r}", "namespace": namespace, "labels": labels, "creationTimestamp": rfc3339(created)}
        if notes:
            meta["annotations"] = notes
        pods.append({"kind": "Pod", "metadata": meta, "spec": spec, "status": status})
    return pods


def _checkpointing(job: Job) -> dict[str, str]:
    """The annotations a trainer's pod declares: its checkpoint interval, its last save's time,
    whether it saves on request."""
    notes = {}
    if job.checkpoint_every_s is not None:
        notes[names.CHECKPOINT_EVERY_S_ANNOTATION] = f"{job.checkpoint_every_s:g}"
    if job.save_s is not None:
        notes[names.CHECKPOINT_SAVE_S_ANNOTATION] = f"{job.save_s:g}"
    if job.saves_on_request:
        notes[names.SAVES_ON_REQUEST_ANNOTATION] = "true"
    return notes


def _topology(job: Job) -> dict[str, str]:
    """The job's topology levels in gpu-policy's own annotations, by level name."""
    required, preferred = names.TOPOLOGY_ANNOTATIONS[0]
    levels = ((required, job.topology.required), (preferred, job.topology.preferred)) if job.topology else ()
    return {key: level for key, level in levels if level is not None}


def serve_kueue_topologies(api, versions: tuple[str, ...] = names.KUEUE_TOPOLOGY_VERSIONS) -> None:
    """Kueue's Topology CRD (cluster-scoped), stored at the first of `versions` and served at all
    of them: both as Kueue 0.16 on serves it, ("v1beta1",) as Kueue 0.14 does."""
    api.add_resource(names.KUEUE_GROUP, versions[0], names.KUEUE_TOPOLOGIES, "Topology", namespaced=False,
                     also=versions[1:])


def kueue_topology(name: str, labels: list[str], version: str = names.KUEUE_TOPOLOGY_VERSIONS[0]) -> dict:
    """A Kueue Topology as an admin writes it: its levels' node labels, widest first."""
    return {"apiVersion": f"{names.KUEUE_GROUP}/{version}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def _constraints(spec: dict, job: Job) -> None:
    """The job's node selector, required node affinity and tolerations, as a pod spec says them."""
    if job.node_selector:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **job.node_selector}
    if job.node_affinity:
        if "affinity" in spec:
            raise ValueError(f"{job.name}: gpu_model beside node_affinity is not written here")
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": t.get("match_expressions", []), "matchFields": t.get("match_fields", [])}
            for t in job.node_affinity]}}}
    if job.tolerations:
        spec["tolerations"] = [dict(t) for t in job.tolerations]


def load_into(api, s: Scenario, now: float, namespace: str = "jobs") -> None:
    """Put the scenario's nodes, queues and jobs into the fake API server; with a
    `composable:` section, its nodes labelled, its pools in the ConfigMap (the pool's free
    GPUs plus what requests hold) and one request of gpu-policy's per node with GPUs attached;
    the queues' usage in the usage ConfigMap, as at `now`."""
    spots = {n.name: n for n in s.composable.nodes} if s.composable else {}
    for n in s.nodes:
        api.put(composable_node_object(n, spots[n.name].max_gpus) if n.name in spots else node_object(n))
    if s.composable:
        serve_composability_requests(api)
        held: dict[str, int] = {}
        for spot in s.composable.nodes:
            if spot.attached:
                model = s.node(spot.name).gpu_model
                api.put(attached_request(spot.name, model, spot.attached))
                held[model] = held.get(model, 0) + spot.attached
        c = s.composable
        api.put(composable_config_map({"pools": [{"model": p.model, "free": p.free + held.get(p.model, 0)}
                                                 for p in c.pools], "attach_seconds": c.attach_seconds,
                                       "idle_detach_s": c.idle_detach_s, "before_preemption": c.before_preemption}))
    labels = {n.name: n.labels for n in s.namespaces}
    for ns in sorted({namespace} | {j.name.partition("/")[0] for j in s.jobs if "/" in j.name} | set(labels)):
        api.put({"kind": "Namespace", "metadata": {"name": ns, "labels": dict(labels.get(ns, {}))}})
    api.put(queues_config_map(s))
    usage = {q.name: q.usage_gpu_h for q in s.queues if q.usage_gpu_h}
    if usage:  # where a cluster holds it: the history the leader wrote, now
        api.put(usage_config_map(usage, now))
    shared = {n.name: n.gpu_sharing.replicas for n in s.nodes if n.gpu_sharing}
    for job in s.jobs:
        for pod in pod_objects(job, now, namespace, shared):
            api.put(pod)


def gpu_pod(namespace: str, name: str, gpus: int | None = 1, node: str | None = None, labels: dict | None = None,
            annotations: dict | None = None, **spec) -> dict:
    """A pod for the mapping tests: `gpus` whole GPUs (None: asks for none), bound to `node`."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus is not None else {}
    body = {"containers": [{"name": "c", "image": "x", "resources": resources}], **spec}
    if node:
        body["nodeName"] = node
    meta = {"name": name, "namespace": namespace, "labels": labels or {}, "annotations": annotations or {}}
    return {"kind": "Pod", "metadata": meta, "spec": body, "status": {"phase": "Running" if node else "Pending"}}


def large_scenario(nodes: int, pods: int, teams: int = 4) -> Scenario:
    """A cluster at scale: `nodes` 8-GPU nodes and `pods` one-GPU pods (a few 2-pod gangs),
    about 70% of them running, spread evenly, the rest waiting; `teams` queues."""
    from gpu_policy.model import Queue

    queues = [Queue(f"team-{t}", deserved=nodes * 8 // teams) for t in range(teams)]
    jobs, placed = [], 0
    k = 0
    while k < pods:
        replicas = 2 if k % 50 == 0 and k + 1 < pods else 1
        running = k % 10 < 7
        where = [f"node-{(placed + r) % nodes}" for r in range(replicas)] if running else []
        placed += replicas if running else 0
        jobs.append(Job(name=f"job-{k}", queue=f"team-{k % teams}", gpus=1, replicas=replicas, running=where,
                        submitted_at=k, checkpoint_age_s=60 * (k % 30) if running else None))
        k += replicas
    return Scenario(nodes=[Node(name=f"node-{i}", gpus=8, cpu=96, memory_gib=1024) for i in range(nodes)],
                    queues=queues, jobs=jobs)


def end_evictions(api, before: dict[str, dict], namespace: str = "jobs") -> None:
    """What the cluster does after evictions: the kubelet ends the evicted pods when their
    grace period is over, and their controllers make them again, pending. `before` maps pod
    names to the pods as they were before."""
    import copy

    api.finish_terminating()
    for pod_name, old in before.items():
        if api.get("pods", pod_name, namespace) is None:
            pod = copy.deepcopy(old)
            for key in ("uid", "resourceVersion", "deletionTimestamp"):
                pod["metadata"].pop(key, None)
            pod["metadata"].get("annotations", {}).pop(names.GPU_INDEX_ANNOTATION, None)
            pod["spec"].pop("nodeName", None)
            pod["status"] = {"phase": "Pending"}
            api.put(pod)


def schedule(api, plan: dict, namespace: str = "jobs") -> None:
    """What the scheduler does with the step's pods: bind each pending pod of a job the plan
    runs (started, moved, or kept as a reservation) where the plan puts it."""
    for decision in plan["jobs"]:
        if decision["action"] not in ("start", "move", "keep"):
            continue
        job = decision["name"].removeprefix(f"{namespace}/")
        pods = sorted(p["metadata"]["name"] for p in api.objects("pods", namespace)
                      if p["metadata"]["labels"].get(names.JOB_LABEL) == job)
        for pod_name, replica in zip(pods, decision["replicas"]):
            if not api.get("pods", pod_name, namespace)["spec"].get("nodeName"):
                api.bind(namespace, pod_name, replica["node"])
