"""`gpu-policy status` and `explain` on a live cluster: one look through the fake API server."""

import json
import time

from gpu_policy import load_scenario
from gpu_policy.cli import main
from tests.conftest import scenario_files
from tests.kubernetes.objects import load_into

NAMESPACE = "jobs"


def test_status_and_explain_on_a_live_cluster(api, kubeconfig, capsys):
    s = load_scenario(scenario_files()[0].parent / "departments.yaml")
    load_into(api, s, time.time(), NAMESPACE)
    cluster = ["--cluster", "k8s://", "--kubeconfig", kubeconfig]
    assert main(["status", *cluster, "--format", "json"]) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    queues = {q["name"]: q for q in data["queues"]}
    assert queues["y1"]["pending_by_code"] == {"NotEnoughFreeGpus": 4}
    waiting = [w["name"] for w in data["waiting"] if w["action"] == "wait"]
    assert waiting == [f"{NAMESPACE}/y1-c", f"{NAMESPACE}/y1-d"]
    assert main(["explain", waiting[-1], *cluster, "--format", "json"]) == 0, capsys.readouterr().err
    e = json.loads(capsys.readouterr().out)
    assert e["code"] == "NotEnoughFreeGpus" and e["position"] == 4 and e["changes"]
    assert api.requests and all(r.method == "GET" for r in api.requests)  # status and explain only read
