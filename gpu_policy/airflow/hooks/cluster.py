"""GpuClusterHook: the live cluster behind a cncf-kubernetes connection, as gpu-policy sees it."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings

__all__ = ["GpuClusterHook"]


class GpuClusterHook(BaseHook):
    """The cncf-kubernetes provider's connection (type ``kubernetes``: in_cluster,
    kube_config_path, kube_config, cluster_context, namespace), opened through its own
    ``KubernetesHook``; ``get_conn()`` returns a `KubernetesCluster`, not a raw client.
    The connection's namespace is where a step's job lives when its name gives none."""

    conn_name_attr = "kubernetes_conn_id"
    default_conn_name = "kubernetes_default"
    conn_type = "kubernetes"
    hook_name = "GPU cluster (through a Kubernetes connection)"

    def __init__(self, kubernetes_conn_id: str = default_conn_name, settings: KubernetesSettings | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.settings = settings

    def get_conn(self) -> KubernetesCluster:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

        kube = KubernetesHook(conn_id=self.kubernetes_conn_id)
        return KubernetesCluster(f"k8s:// (connection {self.kubernetes_conn_id})", api_client=kube.get_conn(),
                                 namespace=kube.get_namespace(), settings=self.settings)
