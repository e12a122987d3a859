"""The names gpu-policy reads and writes in a cluster (the contract: docs/kubernetes.md).

One home for every label, annotation and object name, so the reader, the writer, the
test helpers and the docs agree.
"""

from gpu_policy import model
from gpu_policy.model import checkpointing
from gpu_policy.model.topology import HOSTNAME

PREFIX = "gpu-policy.io/"

# labels and annotations a team (or gpu-policy) puts on pods and namespaces
QUEUE_LABEL = "gpu-policy.io/queue"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
JOB_LABEL = "gpu-policy.io/job"
PREEMPTIBLE_LABEL = "gpu-policy.io/preemptible"
FRACTION_ANNOTATION = "gpu-policy.io/gpu-fraction"
KAI_FRACTION_ANNOTATION = "gpu-fraction"
GPU_INDEX_ANNOTATION = "gpu-policy.io/gpu-index"
# "preemption that loses no work": the names have their home in the model, below both the
# controller and the trainer (gpu_policy.model.checkpointing)
LAST_CHECKPOINT_ANNOTATION = checkpointing.LAST_CHECKPOINT
#: how long the last checkpoint save took (written by the trainer after each save)
CHECKPOINT_SAVE_S_ANNOTATION = checkpointing.CHECKPOINT_SAVE_S
CHECKPOINT_REQUESTED_ANNOTATION = checkpointing.CHECKPOINT_REQUESTED
SAVES_ON_REQUEST_ANNOTATION = checkpointing.SAVES_ON_REQUEST
CHECKPOINT_EVERY_S_ANNOTATION = checkpointing.CHECKPOINT_EVERY_S
PREEMPTED_ANNOTATION = "gpu-policy.io/preempted"
#: on a victim the plan stops at its periodic checkpoint due soon (a plan's `evict_after_s`), written by the
#: controller: the time of the plan that chose so, and the time it is evicted at the latest (RFC 3339 UTC)
CHECKPOINT_AWAITED_ANNOTATION = "gpu-policy.io/checkpoint-awaited"
EVICT_BY_ANNOTATION = "gpu-policy.io/evict-by"
#: the scheduling gate that holds a GPU pod until gpu-policy places it (spec "Admission")
ADMISSION_GATE = "gpu-policy.io/admission"
#: on a namespace: "true" makes its GPU pods gpu-policy's (they are created gated)
MANAGED_NAMESPACE_LABEL = "gpu-policy.io/managed"
#: on a gang's pods: how many pods the gang has (it waits until that many exist)
REPLICAS_ANNOTATION = "gpu-policy.io/replicas"
#: "true" on the pods of an Indexed batch Job: they are one gang (a batch Job's pods are otherwise independent)
GANG_LABEL = "gpu-policy.io/gang"
#: where a job's replicas go in the network hierarchy (docs/topology.md): each field (required, preferred)
#: from the first of the three sets that gives it, gpu-policy's own first, then Kueue's, then KAI-Scheduler's
TOPOLOGY_ANNOTATIONS = (("gpu-policy.io/topology-required", "gpu-policy.io/topology-preferred"),
                        ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"),
                        ("kai.scheduler/topology-required-placement", "kai.scheduler/topology-preferred-placement"))
#: KAI-Scheduler's choice among several Topology objects: the name of the one the pod's levels are of
KAI_TOPOLOGY_ANNOTATION = "kai.scheduler/topology"

# on nodes
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARED_RESOURCE_SUFFIX = ".shared"  # NVIDIA's device plugin renames shared GPUs `<resource>.shared` (renameByDefault)
HOSTNAME_LABEL = HOSTNAME  # a topology level labelled so is the node itself
#: GPU feature discovery's NVLink domain (one GB200/GB300 NVL72 rack): a topology level like any other
CLIQUE_LABEL = "nvidia.com/gpu.clique"
GPU_TAINT_KEY = "nvidia.com/gpu"  # the taint GPU nodes commonly carry and GPU pods tolerate
#: what a step's pods tolerate: GPU nodes are commonly tainted so that only GPU work lands there
#: (NVIDIA's GPU operator does it)
GPU_TOLERATIONS = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
UNHEALTHY_GPUS_ANNOTATION = "gpu-policy.io/unhealthy-gpus"  # our extension: GPU indices that take no new work
NO_NEW_WORK_LABEL = "gpu-policy.io/no-new-work"  # in a snapshot only: why a node takes no new work
COMPOSABLE_LABEL = "gpu-policy.io/composable"  # "true": composition may attach GPUs to the node
MAX_GPUS_ANNOTATION = "gpu-policy.io/max-gpus"  # the most GPUs a composable node can hold

# gpu-policy's own objects, in its namespace
DEFAULT_NAMESPACE = "gpu-policy"
QUEUES_CONFIGMAP = "gpu-policy-queues"
QUEUES_KEY = "queues.yaml"
POLICY_KEY = "policy.yaml"  # in the queues ConfigMap: the scenario's `policy:` mapping
TOPOLOGY_KEY = "topology.yaml"  # in the queues ConfigMap: the scenario's `topology:` list (before Kueue's)
RESERVATIONS_CONFIGMAP = "gpu-policy-reservations"
LEASE_NAME = "gpu-policy-planner"
COMPOSABLE_CONFIGMAP = "gpu-policy-composable"
COMPOSABLE_KEY = "composable.yaml"
#: the leader's usage history (fair share over time): `{queue: {gpu_h, at}}` under its key
USAGE_CONFIGMAP = "gpu-policy-usage"
USAGE_KEY = "usage.yaml"
# the admission webhook (deploy/webhook/): its Service, the Secret of its certificates, its
# MutatingWebhookConfiguration and the one webhook in it
WEBHOOK_SERVICE = "gpu-policy-webhook"
WEBHOOK_TLS_SECRET = "gpu-policy-webhook-tls"
WEBHOOK_CONFIGURATION = "gpu-policy-admission"
WEBHOOK_NAME = "pods.gpu-policy.io"
WEBHOOK_PATH = "/mutate-pods"

# the CDI operator's ComposabilityRequest (CoHDI/composable-resource-operator, cluster-scoped)
CRO_GROUP, CRO_VERSION, CRO_PLURAL = "cro.hpsys.ibm.ie.com", "v1alpha1", "composabilityrequests"
CRO_KIND = "ComposabilityRequest"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-policy"  # the value that marks a request as gpu-policy's own
#: on gpu-policy's requests: when `size` last changed (RFC 3339 UTC) and what it was before,
#: so that any later planner can judge the deadline and roll back
REQUESTED_AT_ANNOTATION = "gpu-policy.io/requested-at"
PREVIOUS_SIZE_ANNOTATION = "gpu-policy.io/previous-size"

# KAI-Scheduler's Queue custom resource (cluster-scoped)
KAI_GROUP, KAI_VERSION, KAI_PLURAL = "scheduling.run.ai", "v2", "queues"

# Kueue's Topology (cluster-scoped): the versions tried in turn, the newest first (Kueue 0.16 on serves both,
# 0.14 only v1beta1); its spec.levels[].nodeLabel are the levels, widest first
KUEUE_GROUP, KUEUE_TOPOLOGY_VERSIONS, KUEUE_TOPOLOGIES = "kueue.x-k8s.io", ("v1beta2", "v1beta1"), "topologies"

# Dynamic Resource Allocation, read when a pod has resourceClaims
DRA_GROUP, DRA_VERSION = "resource.k8s.io", "v1"

# PodGroups (namespaced), read when a pod names one: its spec.minMember says whether it is a gang
POD_GROUPS = "podgroups"
KAI_POD_GROUP_VERSION = "v2alpha2"  # scheduling.run.ai
VOLCANO_GROUP, VOLCANO_VERSION = "scheduling.volcano.sh", "v1beta1"
COSCHEDULING_GROUP, COSCHEDULING_VERSION = "scheduling.x-k8s.io", "v1alpha1"  # the scheduler-plugins' coscheduling

# what other schedulers and training operators put on a gang's pods (gpu_policy.kubernetes.read.workloads)
#: where a pod names its PodGroup: (the PodGroup kind's API group, in the pod's "annotations" or "labels", the key)
POD_GROUP_KEYS = ((KAI_GROUP, "annotations", "pod-group-name"),
                  (VOLCANO_GROUP, "annotations", "scheduling.k8s.io/group-name"),
                  (COSCHEDULING_GROUP, "labels", "scheduling.x-k8s.io/pod-group"))
#: the label a JobSet puts on every pod of it; a Kubeflow Trainer TrainJob's JobSet is named as the TrainJob
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: the label a training operator puts on every pod of its job (Kubeflow's training jobs, JobSets): one gang
TRAINING_JOB_LABELS = ("training.kubeflow.org/job-name", JOBSET_LABEL)
RAY_CLUSTER_LABEL, RAY_GROUP_LABEL, RAY_NODE_TYPE_LABEL = "ray.io/cluster", "ray.io/group", "ray.io/node-type"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"  # on an Indexed Job's pods

# Kubeflow Trainer's TrainJob (namespaced): its pods are one gang of `spec.trainer.numNodes`
TRAINER_GROUP, TRAINER_VERSION, TRAINJOBS, TRAINJOB_KIND = "trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob"

# queues that exist only in a snapshot: GPUs that are held but not gpu-policy's to plan
UNMANAGED_QUEUE = "gpu-policy.io/unmanaged"
TERMINATING_QUEUE = model.TERMINATING_QUEUE

