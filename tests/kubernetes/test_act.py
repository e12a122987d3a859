"""Acting on the plan in the fake cluster: evictions that honour budgets, reservations,
steps that re-observe while they wait, and `gpu-policy apply` / `step` / `reconcile`."""

import json
import time

import pytest

from gpu_policy import Job, load_scenario
from gpu_policy.cli import main
from gpu_policy.actions.cycle import apply_plan_once, wait_for_step
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.reservations import read_reservations
from gpu_policy.model import Node, Queue, Scenario
from tests.conftest import SCENARIOS
from tests.kubernetes.objects import end_evictions, gpu_pod, load_into, node_object, queues_config_map, schedule

SEED1 = SCENARIOS / "seed1-greedy-team.yaml"


def run(capsys, *argv) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def reservations(api) -> dict:
    return {r.key: r for r in read_reservations(api.get("configmaps", names.RESERVATIONS_CONFIGMAP, "gpu-policy"))[0]}


@pytest.mark.parametrize("name", ["seed1-greedy-team", "seed2b-fragmentation-running", "seed3b-owner-returns"])
def test_apply_then_replan_ends_in_the_layout_the_file_expects(api, kubeconfig, capsys, name):
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    load_into(api, scenario, time.time())
    before = {p["metadata"]["name"]: p for p in api.objects("pods", "jobs")}
    cluster = ["--cluster", "k8s://", "--kubeconfig", kubeconfig]
    api.reset_log()
    applied = run(capsys, "apply", *cluster, "--execute", "--format", "json")
    victims = [d for d in applied["plan"]["jobs"] if d["action"] in ("preempt", "move")]
    expected = []
    for d in victims:  # each victim job: every pod annotated with the plan's reason, then every pod evicted
        pods = sorted(n for n, p in before.items() if f"jobs/{p['metadata']['labels'][names.JOB_LABEL]}" == d["name"])
        expected += [("PATCH", f"/api/v1/namespaces/jobs/pods/{p}") for p in pods]
        expected += [("POST", f"/api/v1/namespaces/jobs/pods/{p}/eviction") for p in pods]
    assert [(r.method, r.path) for r in api.requests if r.method in ("PATCH", "POST") and "/pods/" in r.path] == expected
    assert {(o["job"], o["action"], o["result"]) for o in applied["outcomes"] if o["action"] != "reserve"} == \
        {(d["name"], d["action"], "done") for d in victims}
    for ns, pod, patch in api.patches:
        reason = next(d["reason"] for d in victims if pod.startswith(d["name"].removeprefix("jobs/")))
        assert patch == {"metadata": {"annotations": {names.PREEMPTED_ANNOTATION: reason}}}
    moved = [d["name"] for d in victims if d["action"] == "move"]
    assert sorted(r.job_name for r in reservations(api).values()) == moved  # a moved job's new place is reserved

    end_evictions(api, before)  # the victims have gone (and come back pending)
    second = run(capsys, "plan", *cluster, "--format", "json")
    starts = {j for j, a in scenario.expect["jobs"].items() if a == "start"}
    assert {d["name"].removeprefix("jobs/") for d in second["jobs"] if d["action"] == "start"} == starts
    assert second["summary"]["preemptions"] == 0
    schedule(api, second)  # the scheduler binds what the plan starts (and the moved job, to its reserved place)
    again = run(capsys, "plan", *cluster, "--format", "json")
    after = {"keep": "keep", "start": "keep", "move": "keep", "preempt": "wait", "wait": "wait"}
    assert {j: d["action"] for j, d in ((d["name"].removeprefix("jobs/"), d) for d in again["jobs"])
            if j in scenario.expect["jobs"]} == {j: after[a] for j, a in scenario.expect["jobs"].items()}
    for queue, fields in scenario.expect.get("queues", {}).items():
        report = next(q for q in again["queues"] if q["name"] == queue)
        assert report["allocated_before"] == report["allocated_after"] == fields["allocated_after"]
    assert (again["summary"]["preemptions"], again["summary"]["moves"], again["summary"]["starts"]) == (0, 0, 0)
    evicted = len(api.evictions)
    last = run(capsys, "apply", *cluster, "--execute", "--format", "json")  # stable: nothing more to do
    assert [o["action"] for o in last["outcomes"]] == [] and len(api.evictions) == evicted
    assert reservations(api) == {}  # the moved job's pods are bound: its reservation was dropped


def test_apply_is_a_dry_run_by_default(api, kubeconfig, capsys):
    load_into(api, load_scenario(SEED1), time.time())
    api.reset_log()
    out = run(capsys, "apply", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--format", "json")
    assert out["executed"] is False and [o["result"] for o in out["outcomes"]] == ["dry run", "dry run"]
    assert {r.method for r in api.requests} == {"GET"}


def eviction_cluster(api, pods: int = 1) -> None:
    """team-b waits for 8 GPUs that team-a borrows with a gang of `pods` pods."""
    api.put(node_object(Node(name="n", gpus=8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=0), Queue("team-b", deserved=8)],
                                       jobs=[])))
    for r in range(pods):
        api.put(gpu_pod("a", f"borrow-{r}", gpus=8 // pods, node="n",
                        labels={names.QUEUE_LABEL: "team-a", names.JOB_LABEL: "borrow"}))
    api.put(gpu_pod("b", "owner", gpus=8, labels={names.QUEUE_LABEL: "team-b"}))


def test_a_budget_that_clears_after_retry_after(api, cluster, fake_time):
    eviction_cluster(api)
    api.block_eviction("a", "borrow-0", times=2, retry_after=5)
    _, outcomes = apply_plan_once(cluster(), execute=True)
    assert [(o.action, o.result) for o in outcomes] == [("preempt", "done")]
    assert fake_time.sleeps == [5, 5] and api.evictions == [("a", "borrow-0")]


def test_a_budget_that_never_clears_is_reported_not_forced(api, cluster, fake_time):
    eviction_cluster(api, pods=2)
    api.block_eviction("a", "borrow-1")  # always, and without Retry-After
    # a lease longer than the fake minute of retries: the renewer thread runs on real time only
    _, outcomes = apply_plan_once(cluster(eviction_deadline_s=60, lease_duration_s=120), execute=True)
    (outcome,) = outcomes
    assert (outcome.result, outcome.detail) == (
        "blocked", "a PodDisruptionBudget refused the eviction for 60 s; still running: a/borrow-1")
    assert fake_time.sleeps == [0.5, 1, 2, 4, 8, 16] and sum(fake_time.sleeps) <= 60  # doubling, within the deadline
    assert api.evictions == [("a", "borrow-0")] and api.calls("/api/v1/namespaces/a/pods/borrow-1", "DELETE") == 0
    assert not api.get("pods", "borrow-1", "a")["metadata"].get("deletionTimestamp")


def test_evicted_pods_hold_their_gpus_and_nobody_is_evicted_twice(api, cluster):
    eviction_cluster(api)
    apply_plan_once(cluster(), execute=True)
    plan, outcomes = apply_plan_once(cluster(), execute=True)  # the victim is still shutting down
    assert outcomes == [] and plan.job("a/borrow-0").queue == names.TERMINATING_QUEUE
    assert plan.job("b/owner").action == "wait" and api.evictions == [("a", "borrow-0")]


def steps_cluster(api) -> None:
    """Four 8-GPU nodes; team-b runs its deserved 16 GPUs on n1 and n2; n3 and n4 are free."""
    for n in ("n1", "n2", "n3", "n4"):
        api.put(node_object(Node(name=n, gpus=8)))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=16), Queue("team-b", deserved=16)],
                                       jobs=[])))
    for n in ("n1", "n2"):
        api.put(gpu_pod("b", f"serve-{n}", gpus=8, node=n, labels={names.QUEUE_LABEL: "team-b"}))


def test_concurrent_steps_never_share_a_node(kubeconfig, tmp_path):
    """8 steps for 8 GPUs each, at once, on a cluster with 2 free 8-GPU nodes: exactly 2
    start, on different nodes; every run of 20. The lease serialises them, reservations
    keep the second from the first's node; no timing is assumed."""
    import threading

    from gpu_policy.kubernetes import KubernetesCluster, KubernetesSettings
    from tests.kubernetes.fake_api import FakeKubernetes

    for run_no in range(20):
        with FakeKubernetes() as api:
            steps_cluster(api)
            config = api.kubeconfig(tmp_path / f"kubeconfig-{run_no}")
            settings = KubernetesSettings(lease_poll_s=0.01, lease_wait_s=600)
            results, start = {}, threading.Barrier(8)

            def step(i: int) -> None:
                c = KubernetesCluster(kubeconfig=config, settings=settings)
                start.wait()
                results[i] = wait_for_step(c, Job(f"steps/step-{i}", "team-a", 8), execute=True)

            threads = [threading.Thread(target=step, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=600)
            started = [d for d in results.values() if d.can_start]
            assert len(results) == 8 and len(started) == 2, run_no
            assert sorted(d.nodes[0] for d in started) == ["n3", "n4"], run_no
            assert all("largest free block is 0" in d.reason for d in results.values() if not d.can_start), run_no
            assert len(reservations(api)) == 2


def test_reservations_are_dropped_once_bound_or_expired(api, cluster, fake_time):
    steps_cluster(api)
    first = wait_for_step(cluster(), Job("steps/first", "team-a", 8), execute=True)
    second = wait_for_step(cluster(), Job("steps/second", "team-a", 8), execute=True)
    assert first.can_start and second.can_start and first.nodes != second.nodes
    assert sorted(reservations(api)) == ["steps.first", "steps.second"]
    assert first.pod_labels == {names.JOB_LABEL: "first", names.QUEUE_LABEL: "team-a"}
    api.put(gpu_pod("steps", "first-pod", gpus=8, node=first.nodes[0], labels=first.pod_labels))  # its pod runs
    fake_time.sleep(601)  # and the second step never made its pod
    plan, _ = apply_plan_once(cluster(), execute=True)
    kept = plan.job("steps/first")
    assert (kept.action, [r.node for r in kept.replicas]) == ("keep", first.nodes)  # the pod, not the reservation
    assert "steps/second" not in {j.name for j in plan.jobs}
    assert reservations(api) == {}


def test_a_wait_ends_when_a_pod_finished_between_two_polls(api, cluster, fake_time):
    steps_cluster(api)
    for n in ("n3", "n4"):  # team-a's deserved 16 GPUs, at the step's priority: nothing to preempt
        api.put(gpu_pod("a", f"busy-{n}", gpus=8, node=n, labels={names.QUEUE_LABEL: "team-a"}, priority=50))

    def sleep(seconds):
        fake_time.sleep(seconds)
        api.delete("pods", "busy-n4", "a")  # it finished meanwhile

    decision = wait_for_step(cluster(), Job("steps/late", "team-a", 8), execute=True, max_wait_s=600,
                             poll_interval_s=30, clock=fake_time.monotonic, sleep=sleep)
    assert decision.can_start and decision.attempts == 2 and decision.nodes == ["n4"]
    assert api.calls("/api/v1/pods") == 2  # it looked again


def test_step_command(api, kubeconfig, capsys):
    steps_cluster(api)
    out = run(capsys, "step", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--job", "train", "--queue", "team-a",
              "--gpus", "8")
    assert out["job"] == "ml/train" and out["can_start"] and out["gpu_count"] == 8  # the context's namespace
    assert out["node_selector"] == {"kubernetes.io/hostname": out["nodes"][0]}
    assert [o["action"] for o in out["outcomes"]] == ["reserve"] and list(reservations(api)) == ["ml.train"]
    dry = run(capsys, "step", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--job", "other", "--queue",
              "team-a", "--gpus", "8", "--dry-run")
    assert dry["can_start"] and dry["outcomes"][0]["result"] == "dry run" and list(reservations(api)) == ["ml.train"]


def test_reconcile_command(api, kubeconfig, capsys):
    load_into(api, load_scenario(SEED1), time.time())
    assert main(["reconcile", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--every", "0.01",
                 "--rounds", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rounds = [line for line in lines if not line.startswith("  ")]
    assert len(rounds) == 2 and "2 preemptions" in rounds[0] and "2 preempt done" in rounds[0]
    assert "0 preemptions" in rounds[1] and "nothing to do" in rounds[1]  # the victims are shutting down
    assert len(api.evictions) == 2


def test_reconcile_goes_on_after_a_failed_round(api, kubeconfig, capsys):
    load_into(api, load_scenario(SEED1), time.time())
    api.inject(403, path="/api/v1/nodes")
    assert main(["reconcile", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--every", "0.01",
                 "--rounds", "2", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "round failed: k8s://: list nodes: refused (403)" in captured.err and "2 preemptions" in captured.out
