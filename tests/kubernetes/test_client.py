"""The client against the fake API server: pagination, 410, retries, refusals, no leaked errors."""

import pytest

from gpu_policy.errors import ClusterAccessDenied, ClusterError, ClusterUnavailable, GpuPolicyError
from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings
from gpu_policy.model import Node, Scenario
from tests.kubernetes.objects import gpu_pod, node_object


def nodes(api, count: int) -> None:
    for i in range(count):
        api.put(node_object(Node(name=f"n{i:03d}", gpus=8)))


def test_lists_follow_continue_pages(api, cluster):
    nodes(api, 12)
    c = cluster(page_size=5)
    assert len(c.client.list_nodes()) == 12
    pages = [r for r in api.requests if r.path == "/api/v1/nodes"]
    assert [r.query.get("limit") for r in pages] == ["5", "5", "5"]
    assert [bool(r.query.get("continue")) for r in pages] == [False, True, True]


def test_pods_drop_finished_by_field_selector(api, cluster):
    api.put(node_object(Node(name="n0", gpus=8)))
    for phase in ("Running", "Pending", "Succeeded", "Failed"):
        pod = gpu_pod("ns", phase.lower(), node="n0" if phase != "Pending" else None)
        pod["status"]["phase"] = phase
        api.put(pod)
    names = sorted(p["metadata"]["name"] for p in cluster().client.list_pods())
    assert names == ["pending", "running"]
    (request,) = [r for r in api.requests if r.path == "/api/v1/pods"]
    assert request.query["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"


def test_an_expired_continue_token_restarts_the_list_once(api, cluster):
    nodes(api, 7)
    api.inject(410, path="/api/v1/nodes", with_continue=True)
    assert len(cluster(page_size=3).client.list_nodes()) == 7  # no duplicates from the first pages
    assert [bool(r.query.get("continue")) for r in api.requests] == [False, True, False, True, True]
    assert [r.status for r in api.requests] == [200, 410, 200, 200, 200]


def test_a_token_that_expires_twice_is_one_line(api, cluster):
    nodes(api, 7)
    api.inject(410, path="/api/v1/nodes", with_continue=True, times=2)
    with pytest.raises(ClusterUnavailable, match=r"^k8s://: list nodes: the continue token expired twice \(410 Gone\)"):
        cluster(page_size=3).client.list_nodes()


def test_429_waits_retry_after_then_succeeds(api, cluster, fake_time):
    nodes(api, 2)
    api.inject(429, path="/api/v1/nodes", times=2, retry_after=3)
    assert len(cluster().client.list_nodes()) == 2
    assert fake_time.sleeps == [3, 3]


def test_5xx_backs_off_doubling_within_the_deadline(api, cluster, fake_time):
    nodes(api, 1)
    api.inject(500, path="/api/v1/nodes", times=3)
    c = cluster(backoff_s=0.5)
    assert len(c.client.list_nodes()) == 1
    assert fake_time.sleeps == [0.5, 1.0, 2.0]
    assert c.client.stats.calls == 4


def test_past_the_deadline_is_one_line(api, cluster, fake_time):
    api.inject(503, path="/api/v1/nodes", times=None, message="etcd is overloaded")
    with pytest.raises(ClusterUnavailable) as e:
        cluster(deadline_s=10, backoff_s=1).client.list_nodes()
    assert str(e.value) == ("k8s://: list nodes: the API server answered 503: etcd is overloaded; "
                            "gave up after 4 attempts within 10 s")
    assert sum(fake_time.sleeps) <= 10


def test_rbac_refusal_names_the_request_and_the_fix(api, cluster):
    api.forbid("list", "pods")
    with pytest.raises(ClusterAccessDenied, match=r'^k8s://: list pods: refused \(403\): pods is forbidden: User '
                                                  r'"system:serviceaccount:gpu-policy:gpu-policy" cannot list resource '
                                                  r'"pods" in API group "" at the cluster scope; grant the permissions in deploy/'):
        cluster().client.list_pods()


def test_unreachable_server(dead_kubeconfig, fake_time):
    c = KubernetesCluster(kubeconfig=dead_kubeconfig, settings=KubernetesSettings(deadline_s=5, timeout_s=2),
                          sleep=fake_time.sleep, monotonic=fake_time.monotonic)
    with pytest.raises(ClusterUnavailable) as e:
        c.observe()
    assert str(e.value).startswith("k8s://: list nodes: the API server is unreachable (connection refused); gave up after")
    assert not _leaks(e.value)


def _leaks(error: BaseException) -> bool:
    """Whether a library's exception is attached to ours (it must not be shown or caught)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    seen = error.__cause__
    return isinstance(seen, (ApiException, HTTPError))


@pytest.mark.parametrize("fault", [(403, None), (404, None), (500, None), (429, 1)])
def test_no_client_error_leaks(api, cluster, fault):
    status, retry_after = fault
    api.inject(status, path="/api/v1/nodes", times=None, retry_after=retry_after)
    with pytest.raises(GpuPolicyError) as e:
        cluster(deadline_s=3).observe()
    assert not _leaks(e.value) and "\n" not in str(e.value)


def test_contexts_and_kubeconfig(api, kubeconfig, tmp_path):
    KubernetesCluster("k8s://other", kubeconfig=kubeconfig).observe()
    assert KubernetesCluster("k8s://", kubeconfig=kubeconfig).default_namespace == "ml"
    with pytest.raises(ClusterError, match=r"^k8s://nope: cannot load the Kubernetes configuration .*kubeconfig: "
                                           r".*nope"):
        KubernetesCluster("k8s://nope", kubeconfig=kubeconfig)
    with pytest.raises(ClusterError, match=r"^k8s://: cannot load the Kubernetes configuration .*missing"):
        KubernetesCluster("k8s://", kubeconfig=str(tmp_path / "missing"))


def test_kubeconfig_from_the_environment(api, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert KubernetesCluster("k8s://").observe().scenario == Scenario(nodes=[], queues=[], jobs=[], source="k8s://")
