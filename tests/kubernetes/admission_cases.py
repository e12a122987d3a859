"""The pods admission is judged on, and what deploy/'s MutatingAdmissionPolicy decides for each:
its match conditions evaluated by a CEL interpreter (cel-python) and its apply configuration's
merge of `spec.schedulingGates` (a list keyed by name). tests/kubernetes/test_deploy.py holds
the policy to the contract with these cases; tests/kubernetes/test_webhook.py holds the
webhook to the policy."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpu_policy.kubernetes.names import ADMISSION_GATE, FRACTION_ANNOTATION

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _container(requests=None, limits=None) -> dict:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": "c", "image": "x", **({"resources": resources} if resources else {})}


GPU = {"nvidia.com/gpu": "1"}
KUEUE_GATE = {"name": "kueue.x-k8s.io/admission"}
PODS = {  # name: (pod spec and annotations, whether the policy gates it)
    "gpu request": ({"containers": [_container(requests={**GPU, "cpu": "1"})]}, {}, True),
    "gpu limit only": ({"containers": [_container(limits=GPU)]}, {}, True),
    "second container": ({"containers": [_container(), _container(limits=GPU)]}, {}, True),
    "init container": ({"containers": [_container()], "initContainers": [_container(requests=GPU)]}, {}, True),
    "fraction": ({"containers": [_container(requests={"cpu": "1"})]}, {FRACTION_ANNOTATION: "0.5"}, True),
    "cpu only": ({"containers": [_container(requests={"cpu": "1"}, limits={"memory": "1Gi"})]}, {"a": "b"}, False),
    "no resources": ({"containers": [_container()]}, {}, False),
    "zero gpus": ({"containers": [_container(requests={"nvidia.com/gpu": "0"})]}, {}, False),
    "created bound": ({"containers": [_container(limits=GPU)], "nodeName": "node-1"}, {}, False),
    "bound fraction": ({"containers": [_container()], "nodeName": "node-1"}, {FRACTION_ANNOTATION: "0.5"}, False),
    "empty node name": ({"containers": [_container(limits=GPU)], "nodeName": ""}, {}, True),
    "another controller's gate": ({"containers": [_container(limits=GPU)], "schedulingGates": [KUEUE_GATE]}, {},
                                  True),
    "our gate already": ({"containers": [_container(limits=GPU)], "schedulingGates": [{"name": ADMISSION_GATE}]},
                         {}, True),
    "no gates yet": ({"containers": [_container(limits=GPU)], "schedulingGates": []}, {}, True),
}


def pod(case: str, namespace: str = "ml") -> dict:
    spec, annotations, _ = PODS[case]
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": "p", "namespace": namespace, **({"annotations": annotations} if annotations else {})}}


def policy() -> dict:
    """deploy/'s MutatingAdmissionPolicy (v1)."""
    return next(d for d in yaml.safe_load_all((DEPLOY / "admission-policy.yaml").read_text())
                if d and d["kind"] == "MutatingAdmissionPolicy")


def policy_matches(obj: dict) -> list[bool]:
    """Each of the policy's match conditions on `obj`, as the API server's CEL would say."""
    import celpy

    env = celpy.Environment()
    return [bool(env.program(env.compile(c["expression"])).evaluate({"object": celpy.json_to_cel(obj)}))
            for c in policy()["spec"]["matchConditions"]]


def policy_gates(obj: dict) -> list[dict]:
    """`spec.schedulingGates` after the policy's apply configuration: a list keyed by name, so
    our gate is added after the others, once."""
    gates = list(obj["spec"].get("schedulingGates") or [])
    return gates if any(g["name"] == ADMISSION_GATE for g in gates) else gates + [{"name": ADMISSION_GATE}]
