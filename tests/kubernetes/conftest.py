"""Fixtures: a fake API server per test, a kubeconfig pointing at it, and a fake clock."""

import socket

import pytest

from gpu_policy.kubernetes import PERMISSIONS, KubernetesCluster, KubernetesSettings
from gpu_policy.kubernetes.transport.webhook import WEBHOOK_PERMISSIONS
from gpu_policy.kubernetes.write.step_client import STEP_PERMISSIONS
from tests.kubernetes.fake_api import FakeKubernetes


class FakeTime:
    """Clocks that sleeping advances: retries and leases wait without taking time."""

    EPOCH = 1_800_000_000.0  # what `time()` says when `monotonic()` says 0

    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.EPOCH + self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def declared() -> set[tuple[str, str, str]]:
    """What the controller's (its webhook's too) and the pipeline steps' code declares it sends."""
    return {(p.verb, p.group, p.resource) for p in PERMISSIONS | STEP_PERMISSIONS | WEBHOOK_PERMISSIONS}


@pytest.fixture
def api():
    """The fake API server; on teardown, every request it saw used a declared permission."""
    with FakeKubernetes() as fake:
        yield fake
    undeclared = fake.permissions_used() - declared()
    assert not undeclared, f"requests beyond the declared RBAC permissions: {sorted(undeclared)}"


@pytest.fixture
def kubeconfig(api, tmp_path):
    return api.kubeconfig(tmp_path / "kubeconfig", contexts=("fake", "other"), namespace="ml")


@pytest.fixture
def fake_time():
    return FakeTime()


@pytest.fixture
def cluster(api, kubeconfig, fake_time):
    """k8s:// through the real client; retries, leases and reservations run on the fake clocks."""
    def make(clock=None, api_client=None, default_namespace=None, **settings):
        settings = {"backoff_jitter": 0, **settings}  # exact waits; tests of the jitter ask for it
        return KubernetesCluster("k8s://", kubeconfig=kubeconfig, settings=KubernetesSettings(**settings),
                                 api_client=api_client, namespace=default_namespace,
                                 sleep=fake_time.sleep, monotonic=fake_time.monotonic, clock=clock or fake_time.time)

    return make


@pytest.fixture
def dead_kubeconfig(tmp_path) -> str:
    """A kubeconfig naming a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "dead-kubeconfig"
    config.write_text(f"""apiVersion: v1
kind: Config
current-context: gone
clusters: [{{name: gone, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: gone, context: {{cluster: gone, user: u}}}}]
""")
    return str(config)
