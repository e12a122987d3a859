"""The CDI operator (CoHDI/composable-resource-operator v0.2.1) as the fake API server plays it.

What its controller and webhook do to a ComposabilityRequest, read from their source and
written again here for the tests (nothing copied):

- after each read of the requests (a GET or a LIST: the controller's turn comes after the
  answer, so right after a patch a request still reads as it was), every request moves one
  step: ``""`` -> NodeAllocating (the finalizer first, a new resourceVersion) -> Updating
  (devices named) -> its devices Attaching, then Online `attach_polls` turns later ->
  Running; a spec that differs from `status.scalarResource` sends it back to NodeAllocating;
- when a request reaches Running, its node's allocatable `nvidia.com/gpu` counts its Online
  devices (as the device plugin would), and it shrinks again when devices go; with
  `plugin_lag`, only when a test calls `count()` (the device plugin re-registering later);
- an injected error (`fail`) never clears: `status.error` and the device's error stay;
- the webhook refuses, on create and on update, a second `samenode` request for the same
  target node, type and model (403 "admission webhook ... denied the request: ...");
- a deleted request is Cleaning (its devices go), then Deleting (the finalizer goes), then gone.
"""

from __future__ import annotations

import copy
import itertools

from gpu_policy.kubernetes.names import CRO_GROUP, CRO_KIND, CRO_PLURAL, CRO_VERSION

MODEL = "A100-80GB"
FINALIZER = "com.ie.ibm.hpsys/finalizer"
WEBHOOK = "vcomposabilityrequest.kb.io"
GPU = "nvidia.com/gpu"


class FakeCdiOperator:
    def __init__(self, api, attach_polls: int = 2):
        self.api = api
        self.attach_polls = attach_polls
        self.failures: dict[str, tuple[str, str | None]] = {}  # request -> (status.error, a device's error)
        self.paused = False
        self.plugin_lag = False  # True: the node's allocatable follows its devices only at `count()`
        self._uncounted: set[str] = set()  # nodes whose allocatable does not count their devices yet
        self._names = itertools.count(1)
        self._age: dict[str, int] = {}  # device -> turns spent Attaching
        self._base: dict[str, int] = {}  # node -> allocatable GPUs that are not the operator's devices
        api.add_resource(CRO_GROUP, CRO_VERSION, CRO_PLURAL, CRO_KIND, namespaced=False)
        api.admission[(CRO_GROUP, CRO_PLURAL)] = self.validate
        api.after_read[(CRO_GROUP, CRO_PLURAL)] = self.reconcile

    # -- for tests ------------------------------------------------------------------------------
    def fail(self, request: str, error: str, device_error: str | None = None) -> None:
        """From now on the request cannot get devices: `error` in status.error, for ever."""
        self.failures[request] = (error, device_error)

    def request(self, name: str) -> dict | None:
        return self.api.get(CRO_PLURAL, name, group=CRO_GROUP)

    def requests(self) -> list[dict]:
        return self.api.objects(CRO_PLURAL, group=CRO_GROUP)

    def count(self) -> None:
        """The device plugin re-registers: each node's allocatable counts its Online devices."""
        uncounted, self._uncounted, self.plugin_lag = self._uncounted, set(), False
        for node_name in sorted(uncounted):
            self._count_devices({"metadata": {"name": ""}}, node_name)

    def settle(self, turns: int = 20) -> None:
        """Let the controller take `turns` turns with nobody reading."""
        for _ in range(turns):
            self.reconcile()

    # -- the webhook ----------------------------------------------------------------------------
    def validate(self, method: str, obj: dict):
        spec = (obj.get("spec") or {}).get("resource") or {}
        if spec.get("allocation_policy") == "differentnode" and spec.get("target_node"):
            return 403, self._denied("TargetNode cannot be specified when AllocationPolicy is set to 'differentnode'")
        if spec.get("allocation_policy", "samenode") != "samenode":
            return None
        for other in self.requests():
            if other["metadata"]["name"] == obj["metadata"]["name"]:
                continue
            theirs = other["spec"]["resource"]
            node = theirs.get("target_node") or next(
                (d.get("node_name") for d in ((other.get("status") or {}).get("resources") or {}).values()), "")
            if (node, theirs["type"], theirs["model"]) == (spec.get("target_node", ""), spec["type"], spec["model"]):
                return 403, self._denied(f"composabilityRequest resource {other['metadata']['name']} with type "
                                         f"{spec['type']} and model {spec['model']} already exists")
        return None

    @staticmethod
    def _denied(why: str) -> str:
        return f'admission webhook "{WEBHOOK}" denied the request: {why}'

    # -- the controller -------------------------------------------------------------------------
    def reconcile(self) -> None:
        if self.paused:
            return
        requests = self.requests()
        for r in requests:  # a node first seen: what its allocatable holds beyond the Online devices is its own
            node_name = r["spec"]["resource"].get("target_node")
            node = self.api.get("nodes", node_name) if node_name else None
            if node is not None and node_name not in self._base:
                self._base[node_name] = int(node["status"]["allocatable"].get(GPU, "0")) - self._online(requests, node_name)
        for request in requests:
            self._turn(request)

    def _turn(self, r: dict) -> None:
        meta, status = r["metadata"], r.setdefault("status", {})
        state = status.get("state", "")
        spec = r["spec"]["resource"]
        if meta.get("deletionTimestamp") and state not in ("", "Cleaning", "Deleting"):
            status["state"] = "Cleaning"
        elif state == "":
            if FINALIZER not in meta.get("finalizers", []):
                meta["finalizers"] = [*meta.get("finalizers", []), FINALIZER]
                r = self.api.put(r)  # an update of its own: a new resourceVersion
                status = r["status"]
            status.update(state="NodeAllocating", error="", scalarResource=copy.deepcopy(spec))
        elif state == "NodeAllocating":
            self._allocate(r, status, spec)
        elif state == "Updating":
            self._update(r, status, spec)
        elif state == "Running":
            if status.get("scalarResource") != spec:
                status.update(state="NodeAllocating", scalarResource=copy.deepcopy(spec))
            else:
                status["error"] = ""
        elif state == "Cleaning":
            status["resources"] = {}
            status["state"] = "Deleting"
            self._count_devices(r, spec.get("target_node"))
        elif state == "Deleting":
            meta["finalizers"] = [f for f in meta.get("finalizers", []) if f != FINALIZER]
            if not meta["finalizers"]:
                self.api.delete(CRO_PLURAL, meta["name"], group=CRO_GROUP)
                return
        self.api.put(r)

    def _allocate(self, r: dict, status: dict, spec: dict) -> None:
        """Keep the devices that fit (Online ones first), name new ones for the rest."""
        failure = self.failures.get(r["metadata"]["name"])
        if failure and not failure[1]:
            status["error"] = failure[0]  # e.g. "insufficient number of available nodes": it tries again later
            return
        devices = status.get("resources") or {}
        keep = sorted(devices, key=lambda d: (devices[d].get("state") != "Online", d))[:spec["size"]]
        devices = {d: devices[d] for d in keep}
        while len(devices) < spec["size"]:
            devices[f"gpu-{next(self._names):04d}"] = {"state": "", "node_name": spec["target_node"]}
        status.update(resources=devices, state="Updating", error="", scalarResource=copy.deepcopy(spec))

    def _update(self, r: dict, status: dict, spec: dict) -> None:
        """Devices attach (each a few turns); all Online: Running, and the node counts them."""
        if status.get("scalarResource") != spec:
            status.update(state="NodeAllocating", scalarResource=copy.deepcopy(spec))
            return
        failure = self.failures.get(r["metadata"]["name"])
        for name, device in sorted((status.get("resources") or {}).items()):
            if device.get("state") == "":
                device["state"] = "Attaching"
                self._age[name] = 0
            elif device.get("state") == "Attaching":
                if failure:
                    status["error"], device["error"] = failure
                    continue
                self._age[name] += 1
                if self._age[name] >= self.attach_polls:
                    device.update(state="Online", device_id=f"GPU-{name}", cdi_device_id=f"cdi-{name}")
        if all(d.get("state") == "Online" for d in (status.get("resources") or {}).values()):
            status.update(state="Running", error="", scalarResource=copy.deepcopy(spec))
            self._count_devices(r, spec["target_node"])

    def _count_devices(self, changed: dict, node_name: str | None) -> None:
        """The device plugin: the node's allocatable GPUs are its own plus the Online devices."""
        node = self.api.get("nodes", node_name) if node_name else None
        if node is None:
            return
        if self.plugin_lag:
            self._uncounted.add(node_name)
            return
        mine = [changed if r["metadata"]["name"] == changed["metadata"]["name"] else r for r in self.requests()]
        allocatable = node["status"]["allocatable"]
        allocatable[GPU] = node["status"]["capacity"][GPU] = str(self._base[node_name] + self._online(mine, node_name))
        self.api.put(node)

    @staticmethod
    def _online(requests: list[dict], node_name: str) -> int:
        return sum(1 for r in requests if r["spec"]["resource"].get("target_node") == node_name
                   for d in ((r.get("status") or {}).get("resources") or {}).values() if d.get("state") == "Online")


def composable_cluster(api, namespace: str = "b") -> FakeCdiOperator:
    """node-1 (8 GPUs, team-a's) and the composable node-3 (2 GPUs, team-b's in `namespace`,
    at most 8); a pool of 6 A100-80GB; the CDI operator. A next job of team-b's for 4 GPUs
    has no room."""
    from gpu_policy.kubernetes import names
    from gpu_policy.model import Node, Queue, Scenario
    from tests.kubernetes.objects import (composable_config_map, composable_node_object, gpu_pod, node_object,
                                          queues_config_map)

    api.put(node_object(Node(name="node-1", gpus=8, gpu_model=MODEL)))
    api.put(composable_node_object(Node(name="node-3", gpus=2, gpu_model=MODEL), max_gpus=8))
    api.put(queues_config_map(Scenario(nodes=[], queues=[Queue("team-a", deserved=8), Queue("team-b", deserved=8)],
                                       jobs=[])))
    api.put(composable_config_map({"pools": [{"model": MODEL, "free": 6}], "attach_seconds": 120}))
    api.put(gpu_pod("a", "a-1", gpus=8, node="node-1", labels={names.QUEUE_LABEL: "team-a"}))
    api.put(gpu_pod(namespace, "b-1", gpus=2, node="node-3", labels={names.QUEUE_LABEL: "team-b"}))
    return FakeCdiOperator(api, attach_polls=2)


def attach_for(job: str, gpus: int = 4, first: int = 2):
    """A stand-in for the planner's composition decision, for tests that need this exact
    one: attach `gpus` A100-80GB to node-3 and start `job` on them (GPU indices from `first`)."""
    from gpu_policy.model.plan import Composition
    from tests.compose_helpers import composed_plan

    def decide(scenario, *args, **kwargs):
        return composed_plan(scenario, [Composition("node-3", MODEL, gpus, f"{job} waits for {gpus} GPUs")],
                             {job: ("node-3", list(range(first, first + gpus)))})
    return decide
