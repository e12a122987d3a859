"""The kinds gpu-policy LISTs, and the controller then WATCHes: one row each, naming its
resource, how the official client lists it, and the permissions that needs.

A one-shot look LISTs them (`KubeClient.list_nodes`, ...); the controller's informer LISTs each
once and WATCHes it from there (`KubeClient.list_kind`, `KubeClient.watch`). A kind whose row
says `served_maybe` is a custom resource the cluster may not serve: its LIST answers 404, and
the kind is then left out (no KAI-Scheduler, no DRA DeviceTaintRules, no CDI operator). A kind
with `older` versions is asked at each in turn until one is served (Kueue's Topology: v1beta2,
else v1beta1, as Kueue 0.14 serves it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from gpu_policy.kubernetes.names import (COSCHEDULING_GROUP, COSCHEDULING_VERSION, CRO_GROUP, CRO_PLURAL, CRO_VERSION,
                                         DRA_GROUP, DRA_VERSION, KAI_GROUP, KAI_PLURAL, KAI_POD_GROUP_VERSION,
                                         KAI_VERSION, KUEUE_GROUP, KUEUE_TOPOLOGIES, KUEUE_TOPOLOGY_VERSIONS,
                                         POD_GROUPS, TRAINER_GROUP, TRAINER_VERSION, TRAINJOBS, VOLCANO_GROUP,
                                         VOLCANO_VERSION)
from gpu_policy.kubernetes.transport.permissions import declare

#: finished pods hold nothing: the API server leaves them out
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"

#: the kinds, as the client, the informer and the cache name them
NODES, PODS, NAMESPACES, CONFIG_MAPS, KAI_QUEUES = "nodes", "pods", "namespaces", "config_maps", "kai_queues"
RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES = "resource_slices", "resource_claims", "resource_claim_templates"
DEVICE_CLASSES, DEVICE_TAINT_RULES = "device_classes", "device_taint_rules"
KAI_POD_GROUPS, VOLCANO_POD_GROUPS, COSCHEDULING_POD_GROUPS = "kai_pod_groups", "volcano_pod_groups", "coscheduling_pod_groups"
COMPOSABILITY_REQUESTS, TRAIN_JOBS = "composability_requests", "train_jobs"
KUEUE_TOPOLOGY_OBJECTS = "kueue_topologies"
#: DRA, PodGroups and TrainJobs (the last two size gangs), watched where the cluster serves
#: them (a kind it does not serve is skipped)
DRA_AND_POD_GROUPS = [RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES, DEVICE_CLASSES, DEVICE_TAINT_RULES,
                      KAI_POD_GROUPS, VOLCANO_POD_GROUPS, COSCHEDULING_POD_GROUPS, TRAIN_JOBS]


@dataclass(frozen=True)
class Kind:
    """One kind: its `resource` (plural, as RBAC and URLs name it) in API `group` at `version`.
    `core`: for a core kind, the CoreV1Api's LIST given gpu-policy's namespace (a custom kind
    is listed in all namespaces through CustomObjectsApi); `what`: its name in messages;
    `older`: versions to ask in turn, newest first, where `version` is not served."""

    resource: str
    group: str = ""
    version: str = "v1"
    what: str = ""
    own_namespace: bool = False
    served_maybe: bool = False
    core: Callable[[Any, str], Callable[..., Any]] | None = None
    older: tuple[str, ...] = ()

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.older)

    @property
    def shown(self) -> str:
        return self.what or f"{self.resource}.{self.group}"


def _custom(plural: str, group: str, version: str, what: str = "") -> Kind:
    return Kind(plural, group, version, what, served_maybe=True)


KINDS: dict[str, Kind] = {
    NODES: Kind("nodes", what="nodes", core=lambda core, ns: core.list_node),
    PODS: Kind("pods", what="pods", core=lambda core, ns: partial(core.list_pod_for_all_namespaces,
                                                                  field_selector=UNFINISHED_PODS)),
    NAMESPACES: Kind("namespaces", what="namespaces", core=lambda core, ns: core.list_namespace),
    CONFIG_MAPS: Kind("configmaps", what="ConfigMaps", own_namespace=True,
                      core=lambda core, ns: partial(core.list_namespaced_config_map, namespace=ns)),
    KAI_QUEUES: _custom(KAI_PLURAL, KAI_GROUP, KAI_VERSION, "KAI queues"),
    RESOURCE_SLICES: _custom("resourceslices", DRA_GROUP, DRA_VERSION),
    RESOURCE_CLAIMS: _custom("resourceclaims", DRA_GROUP, DRA_VERSION),
    RESOURCE_CLAIM_TEMPLATES: _custom("resourceclaimtemplates", DRA_GROUP, DRA_VERSION),
    DEVICE_CLASSES: _custom("deviceclasses", DRA_GROUP, DRA_VERSION),
    DEVICE_TAINT_RULES: _custom("devicetaintrules", DRA_GROUP, DRA_VERSION),
    KAI_POD_GROUPS: _custom(POD_GROUPS, KAI_GROUP, KAI_POD_GROUP_VERSION),
    VOLCANO_POD_GROUPS: _custom(POD_GROUPS, VOLCANO_GROUP, VOLCANO_VERSION),
    COSCHEDULING_POD_GROUPS: _custom(POD_GROUPS, COSCHEDULING_GROUP, COSCHEDULING_VERSION),
    COMPOSABILITY_REQUESTS: _custom(CRO_PLURAL, CRO_GROUP, CRO_VERSION, "ComposabilityRequests"),
    TRAIN_JOBS: _custom(TRAINJOBS, TRAINER_GROUP, TRAINER_VERSION, "TrainJobs"),
    KUEUE_TOPOLOGY_OBJECTS: Kind(KUEUE_TOPOLOGIES, KUEUE_GROUP, KUEUE_TOPOLOGY_VERSIONS[0], "Kueue Topologies",
                                 served_maybe=True, older=KUEUE_TOPOLOGY_VERSIONS[1:]),
}
#: what each kind's LIST and WATCH need (deploy/ grants them)
for _row in KINDS.values():
    for _verb in ("list", "watch"):
        declare(_verb, _row.resource, _row.group, _row.own_namespace)
