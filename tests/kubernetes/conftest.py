"""Fixtures: a fake API server per test, a kubeconfig pointing at it, and a fake clock."""

import socket
import threading
import time

import pytest

from gpu_policy.kubernetes import PERMISSIONS, KubernetesCluster, KubernetesSettings
from gpu_policy.kubernetes.transport.webhook import WEBHOOK_PERMISSIONS
from gpu_policy.kubernetes.write.step_client import STEP_PERMISSIONS
from tests.kubernetes.fake_api import FakeKubernetes


class FakeTime:
    """Clocks that sleeping advances: retries and leases wait without taking time.

    A thread may also wait on it (`wait`, the Lease's renewer does): time moved past the end of
    its wait wakes it, and whoever moved time (a test's `now += ...`, a `sleep`) goes on only once
    every thread it woke waits again or has ended, so a renewal due is sent before the time it was
    due for has passed any further (as a fake clock's timers fire in client-go's tests)."""

    EPOCH = 1_800_000_000.0  # what `time()` says when `monotonic()` says 0
    SETTLE_S = 60.0  # generous: woken threads have this long (real time) to wait again or end

    def __init__(self):
        self._now = 1000.0
        self.sleeps: list[float] = []
        self._timers = threading.Condition()
        self._due: dict[int, float] = {}  # thread ident -> when its wait ends
        self._woken: dict[int, threading.Thread] = {}  # woken by time, until they wait again or end

    @property
    def now(self) -> float:
        return self._now

    @now.setter
    def now(self, value: float) -> None:
        self._advance(lambda now: value)

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self.EPOCH + self._now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._advance(lambda now: now + seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """`Clocks.wait` on this clock: until `event` is set or time has moved `seconds` on."""
        me = threading.get_ident()
        with self._timers:
            self._woken.pop(me, None)
            self._timers.notify_all()
            self._due[me] = self._now + seconds
            while not event.is_set() and self._now < self._due[me]:
                self._timers.wait(0.02)  # nobody tells this lock of the event: look again soon
            del self._due[me]
            if not event.is_set():
                self._woken[me] = threading.current_thread()
            return event.is_set()

    def _advance(self, to) -> None:
        """Move time on, once no thread woken earlier is still at work, and return once every
        thread this move woke waits again or has ended."""
        me = threading.get_ident()
        deadline = time.monotonic() + self.SETTLE_S

        def busy() -> bool:  # woken by time (or due to be) and not waiting again, other than the mover
            due = any(when <= self._now for ident, when in self._due.items() if ident != me)
            return due or any(t.is_alive() for ident, t in self._woken.items() if ident != me)

        def settle() -> None:
            while busy():
                assert time.monotonic() < deadline, "a thread woken by the fake clock did not wait again"
                self._timers.wait(0.02)

        with self._timers:
            settle()
            self._now = to(self._now)
            self._timers.notify_all()
            settle()


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
                                 sleep=fake_time.sleep, monotonic=fake_time.monotonic, clock=clock or fake_time.time,
                                 wait=fake_time.wait)

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
