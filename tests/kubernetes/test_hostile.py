"""A broken or malicious API server: every answer is one line, in bounded time and memory."""

import os
import subprocess
import sys
import time

import pytest
import urllib3

from gpu_policy.errors import ClusterUnavailable
from gpu_policy.kubernetes.transport.bounded import BodyRefused, BoundedBody
from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings
from tests.kubernetes.conftest import FakeTime
from tests.kubernetes.hostile_api import HostileApi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def hostile(tmp_path):
    """Start a hostile server in `mode`; returns (server, kubeconfig path)."""
    servers = []

    def start(mode: str):
        server = HostileApi(mode).__enter__()
        servers.append(server)
        return server, server.kubeconfig(tmp_path / "kubeconfig")

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def list_nodes(kubeconfig: str, fake_time: FakeTime | None = None, **settings) -> list:
    fake_time = fake_time or FakeTime()
    cluster = KubernetesCluster("k8s://", kubeconfig=kubeconfig, settings=KubernetesSettings(**settings),
                                sleep=fake_time.sleep, monotonic=fake_time.monotonic, clock=fake_time.time)
    return cluster.client.list_nodes()


@pytest.mark.parametrize("mode,settings,line", [
    ("drip", {"timeout_s": 1, "deadline_s": 1},
     r"^k8s://: list nodes: the answer took longer than its deadline \([\d,]+ bytes read\)$"),
    ("endless", {"max_response_bytes": 4 << 20}, r"^k8s://: list nodes: the answer is larger than 4,194,304 bytes$"),
    ("gzip-bomb", {"max_response_bytes": 4 << 20}, r"^k8s://: list nodes: the answer is larger than 4,194,304 bytes$"),
    ("huge", {"max_response_bytes": 4 << 20}, r"^k8s://: list nodes: the answer is larger than 4,194,304 bytes$"),
    ("deep", {}, r"^k8s://: list nodes: the answer is JSON nested too deeply$"),
    ("html", {}, r"^k8s://: list nodes: the answer is not JSON$"),
    ("endless-pages", {}, r"^k8s://: list nodes: 10 pages in a row had no items yet a continue token "
                          r"\(max_empty_pages\); the API server's list makes no progress$"),
    ("endless-items", {"max_pages": 50}, r"^k8s://: list nodes: the list has more than 50 pages \(max_pages\); "),
    ("same-token", {}, r"^k8s://: list nodes: the API server's continue token does not advance \(page 2 "),
    ("reset", {"deadline_s": 5}, r"^k8s://: list nodes: the API server is unreachable \(\w+\); gave up after "),
    ('json:{"items": null}', {}, r"^k8s://: list nodes: the answer has no list of items$"),
    ('json:{"items": [], "metadata": {"continue": 7}}', {},
     r"^k8s://: list nodes: the API server's continue token does not advance"),
])
def test_a_hostile_answer_is_one_line(hostile, mode, settings, line):
    _, kubeconfig = hostile(mode)
    with pytest.raises(ClusterUnavailable, match=line) as e:
        list_nodes(kubeconfig, **settings)
    assert "\n" not in str(e.value)


def test_a_run_of_empty_pages_is_cut_off_at_max_empty_pages(hostile):
    """Empty pages with new tokens: the list stops at the `max_empty_pages`-th, not at `max_pages`."""
    server, kubeconfig = hostile("endless-pages")
    with pytest.raises(ClusterUnavailable, match=r"\(max_empty_pages\)"):
        list_nodes(kubeconfig, max_empty_pages=3)
    assert server.requests == 3


class TickingTime(FakeTime):
    """A clock that moves on by a second at each look: pages that take their time."""

    def monotonic(self) -> float:
        self.now += 1
        return self.now


def test_a_whole_list_has_a_deadline(hostile):
    server, kubeconfig = hostile("endless-items")
    with pytest.raises(ClusterUnavailable, match=r"^k8s://: list nodes: the list took longer than 30 s "
                                                 r"\(list_deadline_s\) and was cut off after \d+ pages$"):
        list_nodes(kubeconfig, TickingTime(), list_deadline_s=30)
    assert 1 < server.requests < 30


@pytest.mark.parametrize("header,waited", [
    ("nan", [0.5]), ("-1", [0.5]), ("0", [0.5]), ("1e308", [30.0]), ("inf", [0.5]), ("Wed, 21 Oct 2015 07:28:00 GMT", [0.5]),
    ("3", [3.0]),
])
def test_retry_after_is_parsed_and_clamped(hostile, header, waited):
    _, kubeconfig = hostile(f"retry-after:{header}")
    fake_time = FakeTime()
    assert list_nodes(kubeconfig, fake_time, backoff_jitter=0, deadline_s=120) == []
    assert fake_time.sleeps == waited


def test_own_backoff_is_jittered_and_floored(api, kubeconfig):
    """Jittered around the doubling backoff, never under the floor."""
    api.inject(503, path="/api/v1/nodes", times=4)
    fake_time, draws = FakeTime(), iter([0.0, 1.0, 0.5, 0.0])
    cluster = KubernetesCluster("k8s://", kubeconfig=kubeconfig,
                                settings=KubernetesSettings(backoff_s=0.5, backoff_jitter=0.5, retry_floor_s=0.4),
                                sleep=fake_time.sleep, monotonic=fake_time.monotonic)
    cluster.client._jitter = lambda: next(draws)
    cluster.client.list_nodes()
    assert fake_time.sleeps == [0.4, 1.5, 2.0, 2.0]  # 0.25 floored to 0.4, 1.0 x 1.5, 2.0 x 1, 4.0 x 0.5


def test_a_round_has_a_request_budget(api, kubeconfig):
    api.inject(503, path="/api/v1/nodes", times=None)
    fake_time = FakeTime()
    cluster = KubernetesCluster("k8s://", kubeconfig=kubeconfig,
                                settings=KubernetesSettings(max_requests_per_round=5, deadline_s=1e6),
                                sleep=fake_time.sleep, monotonic=fake_time.monotonic)
    with pytest.raises(ClusterUnavailable, match=r"^k8s://: list nodes: this round already sent 5 requests "
                                                 r"\(max_requests_per_round\)"):
        cluster.client.list_nodes()
    assert len(api.requests) == 5
    cluster.client.begin_round()
    api.faults.clear()
    assert cluster.client.list_nodes() == []


#: Runs the command from a small process and prints its exit status and peak RSS (KiB): a
#: child forked from the test process itself would start with the test process's peak
#: (hundreds of MB late in a suite) as its own.
LAUNCH = """
import os, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
guard = threading.Timer(120, child.kill)  # generous: before the fix these never ended
guard.start()
_, status, usage = os.wait4(child.pid, 0)
guard.cancel()
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def measured_snapshot(kubeconfig: str, tmp_path, *options: str) -> tuple[int, str, float]:
    """`gpu-policy snapshot` against the server in a child process: its exit status, its
    stderr and its peak RSS in MB (from wait4, so only this child counts)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    with open(tmp_path / "err", "w+") as err:
        done = subprocess.run([sys.executable, "-c", LAUNCH, sys.executable, "-m", "gpu_policy.cli", "snapshot",
                               "--cluster", "k8s://", "--kubeconfig", kubeconfig, *options],
                              env=env, stdout=subprocess.PIPE, stderr=err, text=True, check=True, timeout=300)
        err.seek(0)
        status, peak_kib = map(int, done.stdout.split())
        return status, err.read(), peak_kib / 1024


@pytest.mark.parametrize("mode,options,line", [
    ("drip", ["--api-deadline", "3"], "the answer took longer than its deadline"),
    ("endless", [], "the answer is larger than 67,108,864 bytes"),
    ("gzip-bomb", [], "the answer is larger than 67,108,864 bytes"),
])
def test_the_command_ends_in_bounded_time_and_memory(hostile, tmp_path, mode, options, line):
    _, kubeconfig = hostile(mode)
    status, err, peak_mb = measured_snapshot(kubeconfig, tmp_path, *options)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert line in err
    assert peak_mb < 400, f"peak RSS {peak_mb:.0f} MB"


@pytest.mark.parametrize("mode,line", [
    ("endless", "one line of the answer is larger than 1,048,576 bytes"),
    ("drip", "the answer took longer than its deadline"),
])
def test_a_watch_reads_its_stream_line_by_line_under_the_same_bounds(hostile, mode, line):
    """The controller's watches reuse the reader per event: `BoundedBody.lines`."""
    server, _ = hostile(mode)
    response = urllib3.PoolManager().request("GET", f"{server.url}/api/v1/pods?watch=true", preload_content=False)
    body = BoundedBody(response, time.monotonic() + 1, 1 << 20)
    with pytest.raises(BodyRefused, match=line):
        list(body.lines())
    response.close()


def test_a_watch_stream_yields_each_event(hostile):
    server, _ = hostile('json:{"type": "ADDED"}\n{"type": "DELETED"}\n')
    response = urllib3.PoolManager().request("GET", f"{server.url}/api/v1/pods?watch=true", preload_content=False)
    assert list(BoundedBody(response, time.monotonic() + 5, 1 << 20).lines()) == [b'{"type": "ADDED"}',
                                                                                 b'{"type": "DELETED"}']


@pytest.mark.parametrize("mode,settings,line", [
    ("endless", {"max_response_bytes": 1 << 20}, r"^k8s://: watch pods: one line of the answer is larger than 1,048,576 "
                                                 r"bytes$"),
    ("deep", {}, r"^k8s://: watch pods: the answer is JSON nested too deeply$"),
    ("html", {}, r"^k8s://: watch pods: the answer is not JSON$"),
    ('json:["not", "an", "event"]', {}, r"^k8s://: watch pods: a watch event is not an object with a type$"),
    ('json:{"type": "ERROR", "object": {"code": 500, "message": "etcd"}}', {},
     r"^k8s://: watch pods: the watch ended with an error \(500: etcd\)$"),
])
def test_the_controllers_watch_is_bounded_per_event(hostile, mode, settings, line):
    """`KubeClient.watch` (the controller's informers) reads its stream with the limits every
    other answer has, and says what broke in one line (the informer then resumes)."""
    _, kubeconfig = hostile(mode)
    client = KubernetesCluster("k8s://", kubeconfig=kubeconfig, settings=KubernetesSettings(**settings)).client
    with pytest.raises(ClusterUnavailable, match=line):
        list(client.watch("pods", "1", timeout_s=5))


def test_a_watch_error_410_asks_for_a_relist(hostile):
    from gpu_policy.kubernetes.transport.answers import WatchExpired

    _, kubeconfig = hostile('json:{"type": "ERROR", "object": {"code": 410, "message": "too old"}}')
    client = KubernetesCluster("k8s://", kubeconfig=kubeconfig).client
    with pytest.raises(WatchExpired, match="too old"):
        list(client.watch("pods", "1", timeout_s=5))
