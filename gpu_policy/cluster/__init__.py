"""Clusters gpu-policy observes (docs/kubernetes.md): one protocol, backends chosen by name.

``open_cluster("k8s://")`` is the live cluster (the in-cluster service account, else the
current kubeconfig context), ``open_cluster("k8s://CONTEXT")`` a named context, and a
scenario file path the embedded simulated cluster. The observe -> decide -> act
composition every entry point calls lives in `gpu_policy.actions.cycle`.
"""

from gpu_policy.cluster.embedded import ScenarioCluster
from gpu_policy.cluster.registry import open_cluster, register_source, registry, split_scheme
from gpu_policy.model.cluster import Acted, ActingCluster, Actuator, ClusterSource, Observation, Orders, Outcome

__all__ = ["Acted", "ActingCluster", "Actuator", "ClusterSource", "Observation", "Orders", "Outcome", "ScenarioCluster",
           "open_cluster", "register_source", "registry", "split_scheme"]
