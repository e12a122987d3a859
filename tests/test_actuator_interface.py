"""Acting has one declared interface (gpu_policy.model.cluster: `Actuator`, `ActingCluster`),
which both backends satisfy, and nothing on the acting path reaches into another object's
private members (issue 41)."""

import ast
import inspect
import re
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from gpu_policy.cluster import ScenarioCluster
from gpu_policy.kubernetes import KubernetesCluster
from gpu_policy.kubernetes.write.actuator import KubernetesActuator, Witness
from gpu_policy.kubernetes.write.events import NOT_ADMITTED
from gpu_policy.model.cluster import ActingCluster, Actuator
from gpu_policy.planner.codes import CODES
from tests.conftest import SCENARIOS

ROOT = Path(__file__).resolve().parents[1] / "gpu_policy"
#: the acting path: the actuator and what it writes with, its callers, and the controller
ACTING = [ROOT / "kubernetes" / "write", ROOT / "kubernetes" / "cluster.py", ROOT / "controller", ROOT / "cluster",
          ROOT / "actions"]


def _declared(protocol) -> dict[str, list[str]]:
    """The protocol's methods and their parameters, as a bound method has them (no self)."""
    return {name: list(inspect.signature(member).parameters)[1:] for name, member in vars(protocol).items()
            if callable(member) and not name.startswith("_")}


def _parameters(method) -> list[str]:
    return list(inspect.signature(method).parameters)


@pytest.mark.parametrize("cluster", [lambda: KubernetesCluster(api_client=ApiClient()),
                                     lambda: ScenarioCluster(SCENARIOS / "seed1-greedy-team.yaml")],
                         ids=["k8s", "embedded"])
def test_both_clusters_act_as_the_protocol_declares(cluster):
    cluster = cluster()
    declared = _declared(ActingCluster)
    assert declared.keys() == {"planning", "attach_waiter"}
    for name, parameters in declared.items():
        assert _parameters(getattr(cluster, name)) == parameters, name
    assert isinstance(cluster.executes_by_default, bool)
    assert _declared(Actuator) == {"carry_out": ["plan", "observation", "orders"]}
    assert _parameters(cluster.actuator.carry_out) == ["plan", "observation", "orders"]


def test_the_witness_declares_every_hook_the_actuator_calls():
    calls = set(re.findall(r"self\.witness\.(\w+)\(", inspect.getsource(inspect.getmodule(KubernetesActuator))))
    calls |= set(re.findall(r"self\.witness\.(\w+)\(",
                            (ROOT / "kubernetes" / "write" / "admit.py").read_text()))
    assert calls and calls <= {name for name in vars(Witness) if not name.startswith("_")}


def _files():
    for root in ACTING:
        yield from [root] if root.is_file() else sorted(root.rglob("*.py"))


def test_nothing_on_the_acting_path_reads_another_object_s_private_members():
    found = []
    for path in _files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_every_reason_code_the_actuator_writes_is_a_plan_code():
    written = set()
    for path in (ROOT / "kubernetes" / "write").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "WaitReason":
                code = node.args[0]
                choices = [code.body, code.orelse] if isinstance(code, ast.IfExp) else [code]
                written |= {c.value for c in choices if isinstance(c, ast.Constant)}
    assert {"ReleaseFailed", "PinnedToOtherNode", "WaitingForGang", "NotManaged", "WaitingForComposition",
            "UnreadablePod", "NoNodeFits", "WaitingForCheckpoint"} <= written
    assert written <= set(CODES) and NOT_ADMITTED <= set(CODES)
