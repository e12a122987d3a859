"""The leader's usage history, driven turn by turn on the fake clock: written once a minute while
GPUs are held, read by the next leader (a change of leader loses at most a minute), shown in
/metrics with the fair shares it gave, and a corrupt ConfigMap warned about and replaced."""

import logging
import math
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gpu_policy.controller.metrics import serve
from gpu_policy.controller.usage import WRITE_EVERY_S
from gpu_policy.errors import ClusterBusy
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.clocks import stamp
from gpu_policy.kubernetes.read.usage import read_usage
from gpu_policy.model.checkpointing import parse_rfc3339
from tests.kubernetes.controller_harness import (bind_released, cluster_of, gated_pod, new_controller, released, sees,
                                                 settle)

HALF_LIFE = 3600.0  # an hour: minutes of use make a difference a test can see
POLICY = {"usage_half_life_s": HALF_LIFE}
TURN = 20.0  # seconds of fake time per turn: the lease is renewed every 5 s, so every turn
USAGE_PATH = f"/api/v1/namespaces/{names.DEFAULT_NAMESPACE}/configmaps/{names.USAGE_CONFIGMAP}"


def turn(fake_time, *controllers) -> None:
    fake_time.now += TURN
    for c in controllers:
        c.take_changes()
        c.step()


def written(api) -> tuple[dict[str, float], float | None] | None:
    """The usage ConfigMap as it is: each queue's GPU-hours, as a reader reads them at the time
    they were decayed to, and that time (None: no queue has any)."""
    config_map = api.get("configmaps", names.USAGE_CONFIGMAP, names.DEFAULT_NAMESPACE)
    if config_map is None:
        return None
    entries = yaml.safe_load(config_map["data"][names.USAGE_KEY]) or {}
    times = {parse_rfc3339(e["at"]).timestamp() for e in entries.values()}
    assert len(times) <= 1  # every queue decayed to the time of the write
    at = times.pop() if times else None
    read = read_usage(config_map, at or 0.0, HALF_LIFE, names.DEFAULT_NAMESPACE)
    assert read.problem is None, read.problem
    return read.history.gpu_h, at


def held_all_along(gpus: float, seconds: float) -> float:
    """The decayed GPU-hours of `gpus` held for `seconds`."""
    return gpus * HALF_LIFE / math.log(2) * (1 - 2 ** (-seconds / HALF_LIFE)) / 3600


def gauges(c, name: str) -> dict[str, float]:
    families = {f.name: f for f in text_string_to_metric_families(c.metrics.text().decode())}
    return {s.labels["queue"]: s.value for s in families[name].samples}


def two_controllers_eight_pods(api, cluster):
    """A node of 8 GPUs, queue a deserving them and asking for them (8 gated 1-GPU pods), and two
    controllers: the first to turn leads."""
    cluster_of(api, nodes=1, gpus=8, queues=[{"name": "a", "deserved": 8}], policy=POLICY)
    for i in range(8):
        api.put(gated_pod(f"a-{i}", "a"))
    return new_controller(cluster), new_controller(cluster)


def test_two_leaders_in_turn_keep_one_history_and_lose_at_most_a_minute(api, cluster, fake_time):
    first, second = two_controllers_eight_pods(api, cluster)
    try:
        settle(first, fake_time, lambda: len(released(api)) == 8)
        began = first.usage.history.at  # the round that released them: 8 GPUs held from then on
        settle(second, fake_time, turns=2)
        assert first.leading and not second.leading
        times = []
        for _ in range(30):  # ten minutes, the standby looking at the Lease all along
            turn(fake_time, first, second)
            now = written(api)
            if now is not None and (not times or now[1] != times[-1]):
                times.append(now[1])
        # once a minute, neither more nor less, on the controller's clock; the standby wrote none
        assert len(times) == 10 and all(later - earlier == WRITE_EVERY_S for earlier, later in zip(times, times[1:]))
        assert api.calls(USAGE_PATH, "PUT") == 9  # created once, then replaced
        assert api.calls(USAGE_PATH, "GET") == 1  # read when it took the lead; each write reads the cache
        usage, at = written(api)
        assert usage["a"] == pytest.approx(held_all_along(8, at - began), abs=1e-6)  # as written: to the millionth

        turn(fake_time, first, second)
        turn(fake_time, first, second)  # 40 s after the last write, the first hands over, writing first
        first.shut_down()
        last_usage, last_at = written(api)
        assert last_at == fake_time.time() and last_usage["a"] == pytest.approx(held_all_along(8, last_at - began),
                                                                                abs=1e-6)
        turn(fake_time, second)  # ... and the second takes the lead, reading what the first wrote
        assert second.leading
        took_over = second.usage.history.at
        read_back = last_usage["a"] * 2 ** (-(took_over - last_at) / HALF_LIFE)
        assert gauges(second, "gpu_policy_queue_usage_gpu_hours") == {"a": pytest.approx(read_back, abs=0.001)}

        for _ in range(15):  # five minutes more with the second
            turn(fake_time, second)
        usage, at = written(api)
        assert at > took_over
        lost = held_all_along(8, at - began) - usage["a"]
        assert 0 < lost <= 8 * TURN / 3600  # only from the hand-over to the second's first look: these pods say
        # nothing of when they started (test_a_killed_leaders_successor_counts_what_ran_meanwhile)
        assert lost == pytest.approx(held_all_along(8, took_over - last_at) * 2 ** (-(at - took_over) / HALF_LIFE),
                                     abs=2e-6)  # the history written to the millionth
    finally:
        first.stop.set()
        second.stop.set()


def test_a_killed_leaders_successor_counts_what_ran_meanwhile(api, cluster, fake_time):
    """A leader that dies writes nothing more; the next one counts, for the time since the last
    write, the GPUs of the jobs it finds running, for as long as each has run (status.startTime)."""
    first, second = two_controllers_eight_pods(api, cluster)
    try:
        settle(first, fake_time, lambda: len(released(api)) == 8)
        began = first.usage.history.at
        assert bind_released(api) == 8
        for pod in api.objects("pods", "jobs"):  # the kubelet's start time: the moment of their release
            api.put({**pod, "status": {**pod.get("status", {}), "phase": "Running", "startTime": stamp(began)}})
        for _ in range(5):  # a write a minute in, then 40 s more: the first dies without a word
            turn(fake_time, first)
        _, last_at = written(api)
        assert fake_time.time() - last_at == 2 * TURN
        first.stop.set()
        while not second.leading:  # the Lease expires, and the second takes the lead
            turn(fake_time, second)
        took_over = second.usage.history.at
        assert took_over - last_at > WRITE_EVERY_S  # more than a minute unwritten
        for _ in range(6):
            turn(fake_time, second)
        usage, at = written(api)
        assert at > took_over
        # all of it counted, but for start times and ages in whole seconds
        assert usage["a"] == pytest.approx(held_all_along(8, at - began), abs=8 * 2 / 3600)
    finally:
        first.stop.set()
        second.stop.set()


def test_pods_being_deleted_count_for_their_queue_until_they_are_gone(api, cluster, fake_time):
    """A pod being deleted still holds its GPUs (saving a checkpoint, say): its queue's usage
    grows, and the history is written once a minute as long as it does."""
    first, second = two_controllers_eight_pods(api, cluster)
    second.stop.set()  # one controller is enough here
    try:
        settle(first, fake_time, lambda: len(released(api)) == 8)
        began = first.usage.history.at
        assert bind_released(api) == 8
        for pod in api.objects("pods", "jobs"):
            api.put({**pod, "metadata": {**pod["metadata"], "deletionTimestamp": stamp(began)}})
        sees(first, lambda: all(first.cache.pod("jobs", f"a-{i}")["metadata"].get("deletionTimestamp")
                                for i in range(8)))
        plan = first.round()
        assert {q.name: q.allocated_after for q in plan.queues}[names.TERMINATING_QUEUE] == 8
        for _ in range(12):  # four minutes, the pods still on the node
            turn(fake_time, first)
        usage, at = written(api)
        assert fake_time.time() - at < WRITE_EVERY_S  # still written every minute
        assert usage["a"] == pytest.approx(held_all_along(8, at - began), abs=8 * TURN / 3600)
    finally:
        first.stop.set()


def test_usage_and_the_fair_shares_it_gave_are_in_metrics(api, cluster, fake_time):
    cluster_of(api, nodes=2, gpus=8, queues=[{"name": "a", "deserved": 0}, {"name": "b", "deserved": 0}],
               policy=POLICY)
    for i in range(16):
        api.put(gated_pod(f"a-{i}", "a"))
    c = new_controller(cluster)
    server = serve(c.metrics, 0, c.ready, host="127.0.0.1")
    try:
        settle(c, fake_time, lambda: len(released(api)) == 16)
        began = c.usage.history.at
        assert bind_released(api) == 16  # bound pods hold their GPUs as released ones did
        for _ in range(90):  # half an hour of a holding the whole cluster
            turn(fake_time, c)
        for i in range(16):
            api.put(gated_pod(f"b-{i}", "b"))
        sees(c, lambda: c.cache.pod("jobs", "b-15") is not None)
        plan = c.round()  # the plan the gauges now show
        queues = {q.name: q for q in plan.queues}
        assert queues["a"].usage_gpu_h == pytest.approx(held_all_along(16, c.usage.history.at - began), abs=0.001)
        assert queues["b"].usage_gpu_h == 0
        assert queues["a"].fair_share < queues["a"].fair_share_without_usage == 8 < queues["b"].fair_share

        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics", timeout=10) as answer:
            families = {f.name: f for f in text_string_to_metric_families(answer.read().decode())}
        shown = {name: {s.labels["queue"]: s.value for s in families[name].samples}
                 for name in ("gpu_policy_queue_usage_gpu_hours", "gpu_policy_queue_fair_share_gpus")}
        assert shown["gpu_policy_queue_usage_gpu_hours"] == {"a": queues["a"].usage_gpu_h, "b": 0.0}
        assert shown["gpu_policy_queue_fair_share_gpus"] == {q: float(queues[q].fair_share) for q in ("a", "b")}
    finally:
        server.shutdown()
        c.shut_down()


@pytest.mark.parametrize("text, field", [
    ("a: [1, 2", "data.usage.yaml"),
    ("a: {gpu_h: -5, at: '2027-01-15T08:00:00Z'}", "data.usage.yaml.a.gpu_h"),
    ("a: {gpu_h: 5, at: 'tomorrow'}", "data.usage.yaml.a.at"),
    (f"a: {{gpu_h: 500, at: '{stamp(1_800_000_000.0 + 86_400)}'}}", "data.usage.yaml.a.at"),  # a day ahead
])
def test_a_corrupt_history_is_warned_about_planned_without_and_replaced(api, cluster, fake_time, caplog, text, field):
    cluster_of(api, nodes=1, gpus=8, queues=[{"name": "a", "deserved": 8}], policy=POLICY)
    api.put({"kind": "ConfigMap", "metadata": {"name": names.USAGE_CONFIGMAP, "namespace": names.DEFAULT_NAMESPACE},
             "data": {names.USAGE_KEY: text}})
    api.put(gated_pod("a-0", "a", gpus=2))
    c = new_controller(cluster)
    said = f"ConfigMap {names.DEFAULT_NAMESPACE}/{names.USAGE_CONFIGMAP}: {field}: "
    try:
        with caplog.at_level(logging.WARNING, logger="gpu_policy.controller.usage"):
            settle(c, fake_time, lambda: len(released(api)) == 1)
        assert [r.getMessage() for r in caplog.records if r.getMessage().startswith(said)]  # a log line
        plan = c.round()
        assert [w for w in plan.warnings if w.startswith(said)]  # a plan warning; the plan goes on
        assert {q.name: q.usage_gpu_h for q in plan.queues} == {"a": 0}
        for _ in range(3):  # a minute later the leader's history replaces it
            turn(fake_time, c)
        usage, _ = written(api)
        assert usage["a"] == pytest.approx(held_all_along(2, WRITE_EVERY_S), rel=0.02)
        assert not [w for w in c.round().warnings if "usage" in w]
    finally:
        c.shut_down()


def test_nothing_held_nothing_written_and_its_own_writes_plan_nothing(api, cluster, fake_time):
    cluster_of(api, nodes=1, gpus=8, queues=[{"name": "a", "deserved": 8}], policy=POLICY)
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: c.leading and c.plans >= 1)
        for _ in range(3):  # the missing ConfigMap is replaced a minute later by an empty history
            turn(fake_time, c)
        assert written(api) == ({}, None)
        sees(c, lambda: c.cache.read_config_map(names.USAGE_CONFIGMAP) is not None)
        assert c.dirty_since is None  # its own write is no change a plan must see
        for _ in range(15):  # five minutes with nothing held: nothing more to write
            turn(fake_time, c)
        assert api.calls(USAGE_PATH, "PUT") == 0
    finally:
        c.shut_down()


def test_a_leader_that_lost_the_lease_writes_no_usage(api, cluster, fake_time):
    cluster_of(api, nodes=1, gpus=8, queues=[{"name": "a", "deserved": 8}], policy=POLICY)
    api.put(gated_pod("a-0", "a"))
    c = new_controller(cluster)
    try:
        settle(c, fake_time, lambda: len(released(api)) == 1)
        # the API server takes no renewal (the leader's renewer is refused) for a whole lease
        api.inject(503, method="PUT", path=r".*/leases/.*", times=None)
        fake_time.now = c.lease.renewed_at + 15.0
        with pytest.raises(ClusterBusy, match="lost the planning lease"):
            c.usage.write(fake_time.time())
        assert api.get("configmaps", names.USAGE_CONFIGMAP, names.DEFAULT_NAMESPACE) is None
    finally:
        c.stop.set()
