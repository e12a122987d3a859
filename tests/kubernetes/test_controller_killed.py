"""`gpu-policy controller` killed (SIGKILL) at random writes, then started again: nothing is
released or evicted twice, nothing is left marked, and every gated pod that fits is
released after the faults (issue 29; issue 24's "leader killed mid-round").

The fake API server kills the controller's process while it handles the controller's N-th
write (the write lands: the server had it), for a few N drawn with a fixed seed; the Lease
the dead controller held is then let expire, and a new controller runs until the cluster is
settled."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from gpu_policy.kubernetes import names
from tests.kubernetes.controller_harness import gated_pod, released
from tests.kubernetes.test_act import eviction_cluster
from tests.kubernetes.test_killed import ROOT, KillAt, expire_lease, live_marks

DEADLINE_S = 120.0  # generous: a loaded machine still settles, a hung controller still ends
#: writes of one run: the Lease taken, Events, the gang's marks and evictions, two releases
POINTS = sorted(random.Random(24).sample(range(1, 10), 3))


def controller(kubeconfig: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpu_policy.cli", "controller", "--cluster", "k8s://",
                             "--kubeconfig", kubeconfig, "--metrics-port", "0", "--lease-duration", "3",
                             "--debounce", "0.05"], env={**os.environ, "PYTHONPATH": ROOT},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def settled(api) -> bool:
    """team-b's gated pods released and team-a's borrowing gang gone (evicted)."""
    return set(released(api, "b")) >= {"gated-0", "gated-1"} and len(set(api.evictions)) == 3


def wait_for(check, proc: subprocess.Popen, what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not check():
        assert proc.poll() is None, f"the controller exited ({proc.returncode}) before {what}: {proc.stderr.read()}"
        assert time.monotonic() < end, f"the controller did not {what} within {DEADLINE_S:g} s"
        time.sleep(0.1)


@pytest.mark.parametrize("at", POINTS)
def test_killed_then_restarted_does_nothing_twice(api, kubeconfig, at):
    eviction_cluster(api, pods=3)  # a 3-pod gang of team-a borrows team-b's 8 GPUs
    api.delete("pods", "owner", "b")  # team-b's work arrives gated, as in a managed namespace
    api.put({"kind": "Namespace", "metadata": {"name": "b", "labels": {"gpu-policy.io/managed": "true"}}})
    for i in range(2):
        api.put(gated_pod(f"gated-{i}", "team-b", gpus=4, namespace="b"))
    kill = KillAt(at)
    for hook in (("", "pods"), ("", "configmaps"), ("coordination.k8s.io", "leases"), ("events.k8s.io", "events")):
        api.admission[hook] = kill
    api.on_eviction = kill
    first = controller(kubeconfig)
    kill.pid = first.pid
    first.communicate(timeout=DEADLINE_S)
    assert first.returncode == -signal.SIGKILL, "the controller was not killed: fewer writes than expected"
    api.admission.clear()
    api.on_eviction = None
    expire_lease(api)

    second = controller(kubeconfig)
    try:
        wait_for(lambda: (api.finish_terminating() or True) and settled(api), second, "settle")
    finally:
        second.send_signal(signal.SIGTERM)
        _, err = second.communicate(timeout=DEADLINE_S)
    assert second.returncode == 0, err
    assert len(api.evictions) == len(set(api.evictions)) == 3  # the gang, each pod once
    assert live_marks(api) == []
    for name in ("gated-0", "gated-1"):  # released once: no release patch sent to a pod already released
        patches = [r for r in api.requests if r.method == "PATCH" and r.path == f"/api/v1/namespaces/b/pods/{name}"]
        assert len(patches) == 1, (name, len(patches))
    lease = api.get("leases", names.LEASE_NAME, "gpu-policy", group="coordination.k8s.io")
    assert not lease["spec"].get("holderIdentity")  # SIGTERM released it
