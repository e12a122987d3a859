"""One pod, read once: what it asks for, where it runs, which job and queue it claims.

`read_pod` turns the API's JSON into a `PodView` following the contract
(docs/kubernetes.md, "Pods -> jobs"). A value gpu-policy's own labels or annotations
cannot hold (a `gpu-fraction` of 1.5) is bad input: a `ClusterObjectError` naming the
pod and the field. A pod whose GPU request gpu-policy cannot read at all (another GPU
resource), or a pod bound to a node whose GPUs read but whose other fields do not (a bad
`last-checkpoint`), is kept with `unreadable` set: the snapshot counts it as unmanaged, so the
GPUs it holds are never promised to another pod, and it is never touched.
"""

from __future__ import annotations

import json
from datetime import datetime

from gpu_policy.model.fields import JOB_FIELDS, MAX_GPUS_PER_NODE, MIN_GPU_FRACTION, Invalid, mig_profile_name, show
from gpu_policy.errors import ClusterObjectError
from gpu_policy.kubernetes.read.constraints import pod_constraints
from gpu_policy.kubernetes.names import (
    ADMISSION_GATE, CHECKPOINT_AWAITED_ANNOTATION, CHECKPOINT_EVERY_S_ANNOTATION, CHECKPOINT_REQUESTED_ANNOTATION,
    CHECKPOINT_SAVE_S_ANNOTATION, EVICT_BY_ANNOTATION, FRACTION_ANNOTATION, GPU_INDEX_ANNOTATION, GPU_PRODUCT_LABEL,
    HOSTNAME_LABEL, KAI_FRACTION_ANNOTATION, KAI_QUEUE_LABEL, LAST_CHECKPOINT_ANNOTATION, PREEMPTED_ANNOTATION,
    KAI_TOPOLOGY_ANNOTATION, PREEMPTIBLE_LABEL, QUEUE_LABEL, SAVES_ON_REQUEST_ANNOTATION, SHARED_RESOURCE_SUFFIX,
    TOPOLOGY_ANNOTATIONS)
from gpu_policy.kubernetes.read.pod_view import PodRef, PodView, TopologyAsk
from gpu_policy.kubernetes.read.quantity import parse_quantity
from gpu_policy.kubernetes.read.workloads import read_workload

_GPU_VENDORS = ("nvidia.com/", "amd.com/", "gpu.intel.com/")


def read_pod(pod: dict, gpu_resource: str) -> PodView:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    where = f"pod {ns}/{name}"
    gpus = _gpus(spec, meta.get("annotations") or {}, gpu_resource, where)
    try:
        return _read_pod(pod, gpu_resource, gpus, where)
    except ClusterObjectError as e:
        if not (spec.get("nodeName") and gpus > 0):
            raise  # it holds no GPUs: left out (gpu_policy.kubernetes.read.isolate)
        return PodView(namespace=ns, name=name, uid=meta.get("uid", ""), node=spec["nodeName"], gpus=gpus, cpu=None,
                       memory_gib=None, priority=0, created=0.0, deleting=bool(meta.get("deletionTimestamp")),
                       queue_label=None, group=name, preemptible=None, gpu_model=None, gpu_indices=None,
                       checkpoint_at=None, unreadable=f"{e.field}: {e.problem}", bound=True)


def _read_pod(pod: dict, gpu_resource: str, gpus: float, where: str) -> PodView:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    labels = meta.get("labels") or {}
    notes = meta.get("annotations") or {}
    shared = _effective(spec, gpu_resource + SHARED_RESOURCE_SUFFIX, where)
    workload = read_workload(meta, where)
    mig_request = _mig_request(spec, gpu_resource, gpus or shared, where)
    gated = ADMISSION_GATE in gates_of(spec)
    return PodView(
        namespace=ns, name=name, uid=meta.get("uid", ""), node=_held_node(spec, gated), gpus=gpus,
        cpu=_effective(spec, "cpu", where, whole=False), memory_gib=_gib(_effective(spec, "memory", where, whole=False)),
        priority=_priority(spec, where),
        created=_time(meta.get("creationTimestamp"), where, "metadata.creationTimestamp") or 0.0,
        deleting=bool(meta.get("deletionTimestamp")), queue_label=labels.get(QUEUE_LABEL) or labels.get(KAI_QUEUE_LABEL),
        group=workload.group, preemptible=_preemptible(labels, where),
        gpu_model=_gpu_model(spec), gpu_indices=_indices(notes, where),
        unreadable=None if gpus or shared else _other_gpus(spec, gpu_resource, mig_request),
        marked=PREEMPTED_ANNOTATION in notes, constraints=pod_constraints(spec, where),
        shared_devices=shared, mig_request=mig_request, claims=_claims(spec, pod.get("status") or {}),
        gated=gated, bound=bool(spec.get("nodeName")), gang=workload.gang, replicas=workload.replicas,
        pod_group=workload.pod_group, train_job=workload.train_job, topology_ask=_topology_ask(notes),
        **_progress(spec, pod.get("status") or {}, notes, where),
    )


def _topology_ask(notes: dict) -> TopologyAsk | None:
    """The pod's topology annotations as written: each of its required and preferred level from
    the first set that gives it (gpu-policy's, Kueue's, KAI-Scheduler's; a blank value gives
    none), and the Topology it names. None when it has none of them."""
    def first(field: int) -> tuple[str, str] | None:
        return next(((keys[field], notes[keys[field]]) for keys in TOPOLOGY_ANNOTATIONS
                     if str(notes.get(keys[field], "")).strip()), None)

    ask = TopologyAsk(first(0), first(1), str(notes.get(KAI_TOPOLOGY_ANNOTATION, "")).strip() or None)
    return ask if ask != TopologyAsk() else None


def _progress(spec: dict, status: dict, notes: dict, where: str) -> dict:
    """What the pod says of its run and its checkpoints (docs/kubernetes.md, "Pods -> jobs"), and
    gpu-policy's own marks of a victim asked to save or awaited at its checkpoint."""
    times = {field: _time(notes.get(key), where, f"metadata.annotations.{key}") for field, key in (
        ("checkpoint_at", LAST_CHECKPOINT_ANNOTATION), ("checkpoint_requested", CHECKPOINT_REQUESTED_ANNOTATION),
        ("checkpoint_awaited", CHECKPOINT_AWAITED_ANNOTATION), ("evict_by", EVICT_BY_ANNOTATION))}
    saves = notes.get(SAVES_ON_REQUEST_ANNOTATION)
    if saves not in (None, "true", "false"):
        raise ClusterObjectError(where, f"metadata.annotations.{SAVES_ON_REQUEST_ANNOTATION}",
                                 f'must be "true" or "false", got {_shown(saves)}')
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int) or grace < 0):
        raise ClusterObjectError(where, "spec.terminationGracePeriodSeconds",
                                 f"must be a whole number of seconds >= 0, got {json.dumps(grace)}")
    return {**times, "started": _time(status.get("startTime"), where, "status.startTime"), "grace_s": grace,
            "saves_on_request": saves == "true",
            "checkpoint_every_s": _seconds(notes, CHECKPOINT_EVERY_S_ANNOTATION, where, "checkpoint_every_s"),
            "save_s": _seconds(notes, CHECKPOINT_SAVE_S_ANNOTATION, where, "save_s")}


def _seconds(notes: dict, key: str, where: str, field: str) -> float | None:
    """A number of seconds in an annotation, checked as the scenario's job `field` is."""
    text = notes.get(key)
    if text is None:
        return None
    try:
        return JOB_FIELDS[field](float(text))
    except ValueError:
        problem = f"must be a number of seconds, got {_shown(text)}"
    except Invalid as e:
        problem = str(e)
    raise ClusterObjectError(where, f"metadata.annotations.{key}", problem)


def _gpus(spec: dict, notes: dict, gpu_resource: str, where: str) -> float:
    """Whole GPUs the pod asks for, or the fraction of one its annotation gives (not both)."""
    gpus = _effective(spec, gpu_resource, where)
    fraction, fraction_key = _fraction(notes, where)
    if fraction is None:
        return gpus
    if gpus:
        raise ClusterObjectError(where, f"metadata.annotations.{fraction_key}",
                                 f"must not be set on a pod that asks for {gpus:g} whole {gpu_resource}")
    return fraction


def _mig_request(spec: dict, gpu_resource: str, other: float, where: str) -> tuple[str, int] | None:
    """(MIG profile, slices) of a pod that asks for one kind of `<vendor>/mig-<profile>` and
    no `other` GPUs; a profile name a scenario cannot hold is bad input."""
    mig_prefix = gpu_resource.split("/")[0] + "/mig-"
    mig = {r: _effective(spec, r, where) for r in sorted(_resource_names(spec)) if r.startswith(mig_prefix)}
    mig = {r[len(mig_prefix):]: n for r, n in mig.items() if n}
    if len(mig) != 1 or other:
        return None
    request = next(iter(mig.items()))
    try:
        mig_profile_name(request[0])
    except Invalid as e:
        raise ClusterObjectError(where, "spec.containers[*].resources", f"the resource "
                                 f"{show(mig_prefix + request[0])}: its {e}") from None
    return request


def _other_gpus(spec: dict, gpu_resource: str, mig_request: tuple[str, int] | None) -> str | None:
    """Why gpu-policy cannot plan a pod that asks for no `gpu_resource`: the other GPU
    resources it asks for (None when it asks for none)."""
    mig = {gpu_resource.split("/")[0] + "/mig-" + mig_request[0]} if mig_request else set()
    other = sorted({r for r in _resource_names(spec) if r != gpu_resource and r.startswith(_GPU_VENDORS)} - mig)
    return f"asks for {', '.join(other)}, not {gpu_resource}" if other else None


def gates_of(spec: dict) -> list[str]:
    """The names of the pod's scheduling gates, in order."""
    return [g.get("name", "") for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]


def host_selector(spec: dict) -> str | None:
    """The node the pod's nodeSelector pins by hostname, if any."""
    return (spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL) or None


def _held_node(spec: dict, gated: bool) -> str | None:
    """The node whose GPUs the pod holds: where it is bound, else (not gated by gpu-policy)
    the node its hostname selector names, since kube-scheduler can bind it nowhere else:
    a pod gpu-policy released keeps its GPUs until it is bound or deleted."""
    return spec.get("nodeName") or (None if gated else host_selector(spec))


def _claims(spec: dict, status: dict) -> tuple[tuple[str | None, str | None], ...]:
    """The pod's DRA claims: its ResourceClaim's name (given, or made for it from a template and
    named in `status.resourceClaimStatuses`), else the template's name."""
    made = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []
            if isinstance(s, dict)}
    out = []
    for c in spec.get("resourceClaims") or []:
        if isinstance(c, dict):
            out.append((c.get("resourceClaimName") or made.get(c.get("name")), c.get("resourceClaimTemplateName")))
    return tuple(out)


def _resource_names(spec: dict) -> set[str]:
    names = set()
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        names |= set(res.get("requests") or {}) | set(res.get("limits") or {})
    return names


def _request(container: dict, resource: str, where: str, path: str) -> float | None:
    """The container's request of `resource`; its limit when it has no request (as Kubernetes
    defaults it); None when it declares neither."""
    res = container.get("resources") or {}
    for kind in ("requests", "limits"):
        value = (res.get(kind) or {}).get(resource)
        if value is not None:
            try:
                return float(parse_quantity(value))
            except ValueError as e:
                raise ClusterObjectError(where, f"{path}.resources.{kind}.{resource}", str(e)) from None
    return None


def _effective(spec: dict, resource: str, where: str, whole: bool = True) -> float | None:
    """The pod's effective request: the larger of the sum over its containers and its largest
    init container. Whole GPUs: 0 when none is asked for; CPU and memory: None."""
    main = [_request(c, resource, where, f"spec.containers[{i}]")
            for i, c in enumerate(spec.get("containers") or [])]
    init = [_request(c, resource, where, f"spec.initContainers[{i}]")
            for i, c in enumerate(spec.get("initContainers") or [])]
    if all(v is None for v in main + init):
        return 0 if whole else None
    value = max(sum(v or 0 for v in main), max((v or 0 for v in init), default=0))
    if whole and not float(value).is_integer():
        raise ClusterObjectError(where, f"spec.containers[*].resources.requests.{resource}",
                                 f"must be a whole number of GPUs, got {value:g}")
    return int(value) if whole else value


def _gib(value: float | None) -> float | None:
    return None if value is None else value / 2 ** 30


def _fraction(notes: dict, where: str) -> tuple[float | None, str]:
    for key in (FRACTION_ANNOTATION, KAI_FRACTION_ANNOTATION):
        if key in notes:
            text = notes[key]
            try:
                value = float(text)
            except (TypeError, ValueError):
                value = None
            if value is None or not MIN_GPU_FRACTION <= value < 1:
                raise ClusterObjectError(where, f"metadata.annotations.{key}",
                                         f"must be a number in [{MIN_GPU_FRACTION:g}, 1), got {_shown(text)}")
            return value, key
    return None, ""


def _priority(spec: dict, where: str) -> int:
    value = spec.get("priority", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClusterObjectError(where, "spec.priority", f"must be a whole number, got {json.dumps(value)}")
    return value


def _preemptible(labels: dict, where: str) -> bool | None:
    if PREEMPTIBLE_LABEL not in labels:
        return None
    value = labels[PREEMPTIBLE_LABEL]
    if value not in ("true", "false"):
        raise ClusterObjectError(where, f"metadata.labels.{PREEMPTIBLE_LABEL}",
                                 f'must be "true" or "false", got {json.dumps(value)}')
    return value == "true"


def _gpu_model(spec: dict) -> list[str] | None:
    """A nodeSelector on the GPU product label, or a required node-affinity `In` on it."""
    selected = (spec.get("nodeSelector") or {}).get(GPU_PRODUCT_LABEL)
    if selected:
        return [selected]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    models: list[str] = []
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == GPU_PRODUCT_LABEL and expr.get("operator") == "In":
                models += [v for v in expr.get("values") or [] if v not in models]
    return models or None


def _indices(notes: dict, where: str) -> list[int] | None:
    text = notes.get(GPU_INDEX_ANNOTATION)
    if text is None:
        return None
    parts = [p.strip() for p in str(text).split(",")]
    if not all(p.isascii() and p.isdigit() and int(p[:5]) < MAX_GPUS_PER_NODE for p in parts):
        raise ClusterObjectError(where, f"metadata.annotations.{GPU_INDEX_ANNOTATION}",
                                 f"must be GPU indices separated by commas, got {_shown(text)}")
    return [int(p) for p in parts]


def _shown(text) -> str:
    """A value as messages show it: bounded (a 5,000-digit annotation is cut)."""
    return json.dumps(str(text) if len(str(text)) <= 80 else str(text)[:80] + "...", ensure_ascii=False)


def _time(text, where: str, field: str) -> float | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ClusterObjectError(where, field, f"must be an RFC 3339 time in UTC such as 2026-01-31T12:00:00Z, "
                                               f"got {json.dumps(text)}")
    return moment.timestamp()


__all__ = ["PodRef", "PodView", "gates_of", "host_selector", "read_pod"]
