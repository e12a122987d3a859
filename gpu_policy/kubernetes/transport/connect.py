"""An ApiClient for a kubeconfig context or the pod's service account, configured for gpu-policy
(no retries of the client's own: `requests.Requests` bounds and words them)."""

from __future__ import annotations

import os

from gpu_policy.errors import ClusterError

_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def in_cluster() -> bool:
    """Whether we run in a pod with a service account (k8s:// then uses it)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(f"{_SERVICE_ACCOUNT}/token")


def service_account_namespace() -> str:
    """The namespace of this pod's service account."""
    with open(f"{_SERVICE_ACCOUNT}/namespace") as f:
        return f.read().strip() or "default"


def connect(context: str | None, kubeconfig: str | None, where: str, in_flight: int = 10):
    """An ApiClient for the in-cluster service account (no context and no kubeconfig given,
    inside a pod), else for `context` (None: the current one) of `kubeconfig` (None:
    $KUBECONFIG or ~/.kube/config), with a connection for each of `in_flight` writes at once
    beside the watches. Returns (api_client, default namespace)."""
    import yaml
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None  # read now: the client reads it at import
    try:
        if context is None and not kubeconfig and in_cluster():
            config.load_incluster_config(client_configuration=cfg)
            namespace = service_account_namespace()
        else:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
            chosen = next((c for c in contexts if c["name"] == context), active) if context else active
            namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
    except (ConfigException, OSError, yaml.YAMLError) as e:
        detail = " ".join(str(e).split())[:300]
        raise ClusterError(f"{where}: cannot load the Kubernetes configuration"
                           f"{f' {kubeconfig}' if kubeconfig else ''}: {detail}") from None
    cfg.retries = 0  # our own retries: one place that bounds them and words the failure
    # the controller holds a WATCH per kind open (up to 14) beside its writes in flight and the Lease's
    # renewal: a connection each, kept (urllib3 drops, with a warning, one returned to a full pool)
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 32, in_flight + 22)
    return client.ApiClient(cfg), namespace
