"""Release gated pods: ONE JSON patch per pod (spec "Admission", settled details).

The patch `test`s that the gate at index i is gpu-policy's, `remove`s it (other
controllers' gates stay), and adds the hostname selector (the whole nodeSelector when the
pod has none; KEP-3838 allows additions while a pod is gated). A fraction also gets its
GPU index annotation, in the same patch. A gang's pods are all checked before any is
patched, so a gang that cannot be released where the plan put it stays gated whole; a
gang's placement is written as a reservation before its first release (gpu_policy.kubernetes.write.admit),
so one released part way (a patch refused, the API server or the lease lost mid-gang) keeps
its released pods where they are and the rest placed, and the next round releases the rest.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from gpu_policy.kubernetes.names import ADMISSION_GATE, GPU_INDEX_ANNOTATION, HOSTNAME_LABEL
from gpu_policy.kubernetes.read.pods import PodRef, gates_of, host_selector
from gpu_policy.kubernetes.transport.answers import Answer
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.write.inflight import InFlight
from gpu_policy.model.cluster import WaitReason
from gpu_policy.model.plan import Placement


class PodRelease(NamedTuple):
    """The patch that releases one pod onto `node`."""

    pod: PodRef
    node: str
    operations: list[dict]


def _escape(key: str) -> str:
    """A map key as a JSON pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def release_operations(pod: dict, node: str, gpu_index: list[int] | None) -> list[dict] | WaitReason:
    """The JSON patch that releases `pod` onto `node`; the reason when it cannot be."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    gates = gates_of(spec)
    if ADMISSION_GATE not in gates:
        return WaitReason("ReleaseFailed", "it is no longer gated by gpu-policy")
    pinned = host_selector(spec)
    if pinned and pinned != node:
        return WaitReason("PinnedToOtherNode",
                          f"pinned to node {pinned} by its nodeSelector, but the plan placed it on {node}")
    at = gates.index(ADMISSION_GATE)
    # the pod read, not one made since under its name (a StatefulSet's), and our gate where it was read
    ops = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
           {"op": "test", "path": f"/spec/schedulingGates/{at}/name", "value": ADMISSION_GATE},
           {"op": "remove", "path": f"/spec/schedulingGates/{at}"}]
    if not pinned:
        if spec.get("nodeSelector"):
            ops.append({"op": "add", "path": f"/spec/nodeSelector/{_escape(HOSTNAME_LABEL)}", "value": node})
        else:
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": {HOSTNAME_LABEL: node}})
    if gpu_index is not None:
        value = ",".join(map(str, gpu_index))
        if meta.get("annotations"):
            ops.append({"op": "add", "path": f"/metadata/annotations/{_escape(GPU_INDEX_ANNOTATION)}", "value": value})
        else:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {GPU_INDEX_ANNOTATION: value}})
    return ops


def release_patches(pods: list[PodRef], placements: list[Placement], fractional: bool,
                    read: Callable[[str, str], dict | None]) -> list[PodRelease] | WaitReason:
    """The release patch of each pod onto its placement (pods by name, placements in the
    plan's order), every pod checked before any is sent; the reason when one cannot be
    released, so that the gang stays gated whole. `read` gives a pod's object as it is now."""
    if len(pods) != len(placements):
        return WaitReason("ReleaseFailed", f"{len(pods)} of its pods are gated but the plan placed {len(placements)}")
    patches = []
    for ref, place in zip(pods, placements):
        pod = read(ref.namespace, ref.name)
        if not ref.names(pod):
            return WaitReason("ReleaseFailed", f"pod {ref} changed since the plan looked")
        ops = release_operations(pod, place.node, list(place.gpu_indices) if fractional else None)
        if isinstance(ops, WaitReason):
            return WaitReason(ops.code, f"pod {ref}: {ops.text}")
        patches.append(PodRelease(ref, place.node, ops))
    return patches


def send_releases(client: KubeClient, patches: list[PodRelease], fence: Callable[[], None],
                  on_released: Callable[[PodRelease, dict], None], on_refused: Callable[[PodRelease, str], None],
                  in_flight: InFlight) -> None:
    """Send the release patches, side by side (`in_flight`). `fence` runs before every write;
    on this thread, as each answer comes, `on_released(release, the pod as patched)` or
    `on_refused(release, why)`, so what was released is known even when a later write raises
    (the API server went away, the lease was lost) and a gang is left released part way. A
    refused patch (404, 409, 422) does not stop the others: the gang's reservation holds the
    nodes of the pods still gated, and the next round releases them there."""
    def answered(release: PodRelease, answer: Answer) -> None:
        if answer.status == 200:
            on_released(release, answer.body)
        else:
            on_refused(release, f"pod {release.pod}: the API server answered {answer.status}: {answer.message}")

    in_flight.send_each(patches, lambda r: client.patch_pod_json(r.pod.namespace, r.pod.name, r.operations),
                        answered, fence)
