"""A planner killed (SIGKILL) at random points of `apply --execute` or `reconcile`, then
started again: nothing is done twice and nothing is left marked (issue 29).

The fake API server kills the planner's process while it handles the planner's N-th write
(the write lands: the server had it), for a few N drawn with a fixed seed. The lease the dead
planner held is then let expire, and the command runs again to the end."""

import os
import random
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from gpu_policy.kubernetes import names
from tests.kubernetes.test_act import eviction_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: writes of one full run: the lease taken, 3 marks, 3 evictions, the lease released
WRITES = 8
COMMANDS = {"apply": ["apply", "--execute"], "reconcile": ["reconcile", "--rounds", "1", "--every", "1"]}
POINTS = [(command, at) for command in COMMANDS for at in sorted(random.Random(29).sample(range(1, WRITES + 1), 2))]


class KillAt:
    """Kills the planner while the server handles its `at`-th write."""

    def __init__(self, at: int):
        self.at, self.seen, self.pid = at, 0, None

    def __call__(self, *args):
        self.seen += 1
        if self.seen == self.at and self.pid:
            os.kill(self.pid, signal.SIGKILL)
        return None  # admitted: the write lands


def planner(kubeconfig: str, command: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpu_policy.cli", *COMMANDS[command], "--cluster", "k8s://",
                             "--kubeconfig", kubeconfig], env={**os.environ, "PYTHONPATH": ROOT},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def expire_lease(api) -> None:
    lease = api.get("leases", names.LEASE_NAME, "gpu-policy", group="coordination.k8s.io")
    if lease and lease["spec"].get("holderIdentity"):
        past = datetime.now(timezone.utc) - timedelta(hours=1)
        lease["spec"]["renewTime"] = past.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        api.put(lease)


def live_marks(api) -> list[str]:
    return [p["metadata"]["name"] for p in api.objects("pods", "a")
            if names.PREEMPTED_ANNOTATION in (p["metadata"].get("annotations") or {})
            and not p["metadata"].get("deletionTimestamp")]


@pytest.mark.parametrize("command,at", POINTS)
def test_killed_then_restarted_does_nothing_twice(api, kubeconfig, command, at):
    eviction_cluster(api, pods=3)  # a 3-pod gang borrows team-b's GPUs; team-b's owner waits
    kill = KillAt(at)
    for hook in (("", "pods"), ("", "configmaps"), ("coordination.k8s.io", "leases")):
        api.admission[hook] = kill
    api.on_eviction = kill
    first = planner(kubeconfig, command)
    kill.pid = first.pid
    first.communicate(timeout=300)
    assert first.returncode == -signal.SIGKILL, "the planner was not killed: fewer writes than expected"
    api.admission.clear()
    api.on_eviction = None
    expire_lease(api)

    second = planner(kubeconfig, command)
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert len(api.evictions) == len(set(api.evictions)) >= 1  # nobody evicted twice
    assert live_marks(api) == []  # every pod still running is unmarked
    # a gang cut short by the kill: the next round, once its evicted pods are gone, takes the rest
    api.finish_terminating()
    third = planner(kubeconfig, command)
    _, err = third.communicate(timeout=300)
    assert third.returncode == 0, err
    assert sorted(api.evictions) == [("a", f"borrow-{r}") for r in range(3)] and live_marks(api) == []
