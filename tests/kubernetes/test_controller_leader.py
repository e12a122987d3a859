"""Leadership: one replica acts; a standby takes over after the Lease expires and does
nothing twice; a replica that cannot renew (or lost the Lease) writes nothing."""

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from gpu_policy.errors import ClusterBusy

from gpu_policy.kubernetes import names
from tests.kubernetes.controller_harness import (DEADLINE_S, cluster_of, gated_pod, json_patches, kill,
                                                 new_controller, released, sees, settle)


def writes(controller) -> int:
    """Write requests the replica sent (its own counters)."""
    return sum(s.value for m in controller.metrics.api_requests.collect() for s in m.samples
               if s.name.endswith("_total") and s.labels["verb"] in ("patch", "create", "update")
               and s.labels["resource"] != "leases")


def test_a_killed_leader_is_replaced_and_nothing_is_done_twice(api, cluster, fake_time):
    cluster_of(api)
    for i in range(8):
        api.put(gated_pod(f"a-{i}", "a"))
    first, second = new_controller(cluster), new_controller(cluster)
    try:
        settle(first, fake_time, lambda: len(released(api)) == 8)
        settle(second, fake_time, turns=2)
        assert first.leading and not second.leading and writes(second) == 0
        kill(first)
        for i in range(8, 12):
            api.put(gated_pod(f"a-{i}", "a"))
        settle(second, fake_time, lambda: second.leading)  # after 15 s of fake time the Lease has expired
        settle(second, fake_time, lambda: len(released(api)) == 12)
        assert all(json_patches(api, f"a-{i}") == 1 for i in range(12))
        # the old leader comes back: its last renewal is older than the lease, it stands by and writes nothing
        before = writes(first)
        first.stop.clear()
        first.step()
        assert not first.leading and writes(first) == before
    finally:
        first.stop.set()
        second.stop.set()


def test_a_leader_whose_renewals_are_refused_writes_nothing(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.leading and c.plans >= 1)
        api.put(gated_pod("late", "a"))
        sees(c, lambda: c.cache.pod("jobs", "late") is not None)
        api.inject(503, method="PUT", path=r".*/leases/.*", times=None)  # the API server takes no renewal
        fake_time.now = c.lease.renewed_at + 5.0  # one is due: retried for what is left of the lease, then given up
        lost = r"lost the planning lease \(.*update Lease gpu-policy/gpu-policy-planner: the API server answered 503"
        with pytest.raises(ClusterBusy, match=lost + r": .*; gave up after \d+ attempts within 10 s\)"):
            c.lease.check()  # the fence every write passes
        assert fake_time.now - c.lease.renewed_at < 16  # it gave up as the lease ran out, not a minute later
        c.round()
        assert not c.leading and json_patches(api, "late") == 0 and "late" not in released(api)
        settle(c, fake_time, turns=4)  # standing by: it looks at the Lease, cannot take it, writes nothing
        assert not c.leading and json_patches(api, "late") == 0
    finally:
        c.stop.set()


def test_shut_down_releases_the_lease(api, cluster, fake_time):
    cluster_of(api)
    c = new_controller(cluster)
    settle(c, fake_time, lambda: c.leading)
    c.shut_down()
    lease = api.get("leases", names.LEASE_NAME, names.DEFAULT_NAMESPACE, group="coordination.k8s.io")
    assert lease["spec"].get("holderIdentity") is None


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


def test_the_command_serves_probes_and_metrics_and_exits_0_on_sigterm(api, kubeconfig, tmp_path):
    cluster_of(api)
    api.put(gated_pod("p", "a"))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen([sys.executable, "-m", "gpu_policy.cli", "controller", "--cluster", "k8s://",
                                "--kubeconfig", kubeconfig, "--metrics-port", "0"], env=env,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        assert "metrics on port" in line, line
        port = int(line.rsplit(" ", 1)[1])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and "p" not in released(api):
            time.sleep(0.1)
        assert released(api) == {"p": "n1"}
        assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert _get(f"http://127.0.0.1:{port}/readyz")[0] == 200
        status, text = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and "gpu_policy_is_leader 1.0" in text
        assert 'gpu_policy_api_requests_total{code="200",resource="pods",verb="patch"} 1.0' in text
        assert 'gpu_policy_queue_deserved_gpus{queue="a"} 16.0' in text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lease = api.get("leases", names.LEASE_NAME, names.DEFAULT_NAMESPACE, group="coordination.k8s.io")
    assert lease["spec"].get("holderIdentity") is None
