"""The Kubernetes backend: read a live cluster as a scenario (docs/kubernetes.md).

Importing this package does not import the `kubernetes` client; the first request does.
"""

from gpu_policy.kubernetes.transport.permissions import PERMISSIONS, Permission
from gpu_policy.kubernetes.cluster import KubernetesCluster
from gpu_policy.kubernetes.settings import KubernetesSettings

__all__ = ["PERMISSIONS", "KubernetesCluster", "KubernetesSettings", "Permission"]
