"""A small cluster that changes at random, one watch event at a time, as a busy cluster does: GPU
pods arriving (alone or in gangs, gated, released or bound, unmanaged, fractional, asking for a
topology level), bound, released, marked, checkpointing, being deleted and gone; pods that ask
for no GPU; nodes cordoned, relabelled, resized, not Ready, added and removed; the queues
ConfigMap (quotas, a queue added and removed, a department, topology levels, a broken one), a
namespace's queue label and the reservations ConfigMap edited; objects written again unchanged.

Each change is written to the fake API server and given to the controller's cache as its watch
event, so a look of the cache sees what a controller's look would (tests/kubernetes/
test_kept_look_changes.py drives it)."""

from __future__ import annotations

import json
import random

import yaml

from gpu_policy.controller.cache import CONFIG_MAPS, NAMESPACES, NODES, PODS
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.reservations import Reservation, key_of
from gpu_policy.model import Node
from tests.kubernetes.objects import gpu_pod, node_object, rfc3339

RACK = "example.com/rack"
NAMESPACES_OF_PODS = ("jobs", "team", "loose")  # queue labels on the pods; "team": its namespace's; "loose": none


class Churn:
    def __init__(self, api, rng: random.Random, clock):
        self.api, self.rng, self.clock = api, rng, clock
        self.count = 0
        self.queues = [{"name": "a", "deserved": 16}, {"name": "b", "deserved": 16}]
        self.levels = self.broken = False
        self.reservations: dict[str, str] = {}
        for i in range(1, 6):
            self.api.put(self._node(f"n{i}", 8, rack=f"r{(i + 1) // 2}"))
        self.api.put({"kind": "Namespace", "metadata": {"name": "jobs"}})
        self.api.put({"kind": "Namespace", "metadata": {"name": "team", "labels": {names.QUEUE_LABEL: "b"}}})
        self.api.put({"kind": "Namespace", "metadata": {"name": "loose"}})
        self._write_queues()
        for _ in range(12):
            self._add_pods(None)

    # -- one change ---------------------------------------------------------------------------------
    def step(self, cache) -> None:
        """One change at random, given to `cache` as its watch event."""
        actions = [(self._add_pods, 6), (self._bind, 4), (self._release, 2), (self._end, 4), (self._deleting, 1),
                   (self._touch, 2), (self._checkpoint, 2), (self._mark, 1), (self._other_pod, 1),
                   (self._node_change, 2), (self._queues_change, 1), (self._namespace_change, 1), (self._reserve, 1)]
        if self.broken and self.rng.random() < 0.5:
            self._write_queues(cache)  # fixed
            return
        action = self.rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        action(cache)

    def _put(self, cache, kind: str, obj: dict) -> dict:
        stored = self.api.put(obj)
        if cache is not None:
            cache.apply(kind, "MODIFIED", stored)
        return stored

    def _gone(self, cache, plural: str, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        self.api.delete(plural, meta["name"], meta.get("namespace", ""))
        cache.apply(kind, "DELETED", obj)

    def _pods(self, test=lambda p: True) -> list[dict]:
        return [p for p in self.api.objects("pods") if test(p)]

    def _nodes(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.api.objects("nodes")]

    # -- pods ---------------------------------------------------------------------------------------
    def _add_pods(self, cache) -> None:
        """A pod alone, or a gang of 2-3 (sometimes one short), gated, released or bound."""
        rng = self.rng
        self.count += 1
        namespace = rng.choice(NAMESPACES_OF_PODS)
        gang = rng.random() < 0.3
        size = rng.choice([2, 3]) if gang else 1
        queue = rng.choice(["a", "a", "b", "c", "gone", None]) if namespace == "jobs" else None
        gpus = rng.choice([1, 1, 2, 4])
        state = rng.choice(["gated", "gated", "released", "bound"])
        created = self.clock.time() - rng.uniform(0, 3000)
        for r in range(size - (1 if gang and rng.random() < 0.2 else 0)):
            labels = {names.QUEUE_LABEL: queue} if queue else {}
            notes = {}
            if gang:
                labels[names.JOB_LABEL] = f"g{self.count}"
                notes[names.REPLICAS_ANNOTATION] = str(size)
            if rng.random() < 0.1 and not gang:
                notes[names.FRACTION_ANNOTATION] = "0.5"
            if rng.random() < 0.1:
                notes["gpu-policy.io/topology-required"] = rng.choice(["rack", "row"])
            spec = {"priority": rng.choice([0, 50, 100])} if rng.random() < 0.3 else {}
            pod = gpu_pod(namespace, f"p{self.count}-{r}", None if notes.get(names.FRACTION_ANNOTATION) else gpus,
                          labels=labels, annotations=notes, **spec)
            if rng.random() < 0.3:
                pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": rng.choice(["1", "500m", "4"]),
                                                                         "memory": rng.choice(["8Gi", "1536Mi"])}
            pod["metadata"]["creationTimestamp"] = rfc3339(created)
            self._place(pod, state)
            self._put(cache, PODS, pod)

    def _place(self, pod: dict, state: str) -> None:
        node = self.rng.choice(self._nodes() or ["n1"])
        if state == "gated":
            pod["spec"]["schedulingGates"] = [{"name": names.ADMISSION_GATE}]
        elif state == "released":
            pod["spec"]["nodeSelector"] = {names.HOSTNAME_LABEL: node}
        else:
            self._bound(pod, node)

    def _bound(self, pod: dict, node: str) -> None:
        pod["spec"].pop("schedulingGates", None)
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "startTime": rfc3339(self.clock.time() - self.rng.uniform(0, 900))}
        if self.rng.random() < 0.2:
            pod["metadata"]["annotations"][names.GPU_INDEX_ANNOTATION] = self.rng.choice(["0", "1", "7", "9"])

    def _bind(self, cache) -> None:
        """A waiting pod bound: released by gpu-policy, or by hand (its gate removed)."""
        waiting = self._pods(lambda p: not p["spec"].get("nodeName"))
        if waiting:
            pod = self.rng.choice(waiting)
            self._bound(pod, (pod["spec"].get("nodeSelector") or {}).get(names.HOSTNAME_LABEL)
                        or self.rng.choice(self._nodes() or ["n1"]))
            self._put(cache, PODS, pod)

    def _release(self, cache) -> None:
        gated = self._pods(lambda p: p["spec"].get("schedulingGates"))
        if gated:
            pod = self.rng.choice(gated)
            del pod["spec"]["schedulingGates"]
            pod["spec"]["nodeSelector"] = {names.HOSTNAME_LABEL: self.rng.choice(self._nodes() or ["n1"])}
            self._put(cache, PODS, pod)

    def _end(self, cache) -> None:
        pods = self._pods()
        if pods:
            self._gone(cache, "pods", PODS, self.rng.choice(pods))

    def _deleting(self, cache) -> None:
        pods = self._pods(lambda p: not p["metadata"].get("deletionTimestamp"))
        if pods:
            pod = self.rng.choice(pods)
            pod["metadata"]["deletionTimestamp"] = rfc3339(self.clock.time())
            self._put(cache, PODS, pod)

    def _touch(self, cache) -> None:
        """An object written again as it was (a new resourceVersion, nothing a look reads)."""
        pods = self._pods()
        if pods:
            self._put(cache, PODS, self.rng.choice(pods))

    def _checkpoint(self, cache) -> None:
        running = self._pods(lambda p: p["spec"].get("nodeName"))
        if running:
            pod = self.rng.choice(running)
            pod["metadata"]["annotations"][names.LAST_CHECKPOINT_ANNOTATION] = rfc3339(
                self.clock.time() - self.rng.uniform(0, 600))
            self._put(cache, PODS, pod)

    def _mark(self, cache) -> None:
        """A pod marked preempted, or asked to save (and back)."""
        pods = self._pods()
        if pods:
            pod = self.rng.choice(pods)
            notes = pod["metadata"]["annotations"]
            key = self.rng.choice([names.PREEMPTED_ANNOTATION, names.CHECKPOINT_REQUESTED_ANNOTATION])
            if key in notes:
                del notes[key]
            else:
                notes[key] = "true" if key == names.PREEMPTED_ANNOTATION else rfc3339(self.clock.time())
            self._put(cache, PODS, pod)

    def _other_pod(self, cache) -> None:
        """A pod that asks for no GPU, on a node: its CPU and memory are not the GPU jobs'."""
        self.count += 1
        pod = gpu_pod("loose", f"web-{self.count}", None, node=self.rng.choice(self._nodes() or ["n1"]))
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
        self._put(cache, PODS, pod)

    # -- nodes, ConfigMaps, namespaces ------------------------------------------------------------------
    def _node(self, name: str, gpus: int, rack: str) -> dict:
        return node_object(Node(name=name, gpus=gpus, cpu=64, memory_gib=512, labels={RACK: rack}))

    def _node_change(self, cache) -> None:
        rng = self.rng
        nodes = self.api.objects("nodes")
        what = rng.choice(["cordon", "rack", "size", "ready", "add", "remove"])
        if what == "add" or not nodes:
            self.count += 1
            self._put(cache, NODES, self._node(f"n{self.count}", 8, rng.choice(["r1", "r2", "r3"])))
            return
        node = rng.choice(nodes)
        if what == "remove":
            self._gone(cache, "nodes", NODES, node)
            return
        if what == "cordon":
            node["spec"]["unschedulable"] = not node["spec"].get("unschedulable")
        elif what == "rack":
            node["metadata"]["labels"][RACK] = rng.choice(["r1", "r2", "r3"])
        elif what == "size":
            node["status"]["allocatable"]["nvidia.com/gpu"] = rng.choice(["0", "4", "8"])
        else:
            ready = node["status"]["conditions"][0]
            ready["status"] = "False" if ready["status"] == "True" else "True"
        self._put(cache, NODES, node)

    def _write_queues(self, cache=None, broken: bool = False) -> None:
        self.broken = broken
        data = {names.QUEUES_KEY: "- {name: a, deserved: [" if broken else yaml.safe_dump(self.queues)}
        if self.levels:
            data[names.TOPOLOGY_KEY] = yaml.safe_dump([{"name": "rack", "label": RACK}])
        self._put(cache, CONFIG_MAPS, {"kind": "ConfigMap", "metadata": {"name": names.QUEUES_CONFIGMAP,
                                                                        "namespace": names.DEFAULT_NAMESPACE},
                                       "data": data})

    def _queues_change(self, cache) -> None:
        rng = self.rng
        what = rng.choice(["deserved", "queue c", "department", "levels", "broken"])
        names_ = [q["name"] for q in self.queues]
        if what == "deserved":
            rng.choice(self.queues)["deserved"] = rng.choice([0, 8, 16, 24])
        elif what == "queue c":
            self.queues = [q for q in self.queues if q["name"] != "c"] if "c" in names_ else \
                self.queues + [{"name": "c", "deserved": 8}]
        elif what == "department":  # "b" becomes a department of "c", or back
            for q in self.queues:
                if q["name"] == "c":
                    q.pop("parent", None) if q.get("parent") else q.update(parent="b")
        elif what == "levels":
            self.levels = not self.levels
        self._write_queues(cache, broken=what == "broken")

    def _namespace_change(self, cache) -> None:
        """The "loose" namespace names a queue for its pods, or no longer; "team" names another."""
        if self.rng.random() < 0.5:
            ns = self.api.get("namespaces", "loose")
            labels = ns["metadata"].setdefault("labels", {})
            labels.pop(names.QUEUE_LABEL) if labels.get(names.QUEUE_LABEL) else labels.update({names.QUEUE_LABEL: "a"})
        else:
            ns = self.api.get("namespaces", "team")
            labels = ns["metadata"]["labels"]
            labels[names.QUEUE_LABEL] = "a" if labels[names.QUEUE_LABEL] == "b" else "b"
        self._put(cache, NAMESPACES, ns)

    def _reserve(self, cache) -> None:
        """A reservation for a gang whose pods wait (their nodes, expiring soon), or one taken back."""
        rng = self.rng
        if self.reservations and rng.random() < 0.4:
            del self.reservations[rng.choice(sorted(self.reservations))]
        else:
            gangs = sorted({p["metadata"]["labels"][names.JOB_LABEL] for p in self._pods(
                lambda p: p["metadata"]["namespace"] == "jobs" and names.JOB_LABEL in p["metadata"]["labels"])})
            if not gangs:
                return
            gang = rng.choice(gangs)
            pods = self._pods(lambda p: p["metadata"]["labels"].get(names.JOB_LABEL) == gang)
            r = Reservation(namespace="jobs", job=gang, queue=rng.choice(["a", "b"]), gpus=1, replicas=len(pods),
                            nodes=[rng.choice(self._nodes() or ["n1"]) for _ in pods], gpu_indices=None,
                            expires_at=self.clock.time() + rng.uniform(1, 30))
            self.reservations[key_of(r.job_name)] = r.value()
        self._put(cache, CONFIG_MAPS, {"kind": "ConfigMap",
                                       "metadata": {"name": names.RESERVATIONS_CONFIGMAP,
                                                    "namespace": names.DEFAULT_NAMESPACE},
                                       "data": dict(self.reservations)})


def described(snap) -> dict:
    """What a Snapshot says beside its scenario, as plain data (views: the uids a look read)."""
    return json.loads(json.dumps({
        "pods": snap.pods, "reservations": sorted(snap.reservations), "stale": sorted(snap.stale),
        "marked": snap.marked, "gated": snap.gated, "incomplete": snap.incomplete, "broken": snap.broken,
        "held": snap.held, "asked": snap.asked, "views": sorted(snap.views)}, default=str))
