"""The placement rule (gpu_policy.model.placement) as Kubernetes states it: node selectors,
required node-affinity operators and terms, tolerations against taints, queue users."""

import pytest

from gpu_policy.model import Job, Node, Queue
from gpu_policy.model.placement import admits, constraints_of, may_use, namespace_of, unmet

NODE = Node("gpu-7", 8, labels={"zone": "a", "gpus": "8", "class": "h100"})


def job(**constraints) -> Job:
    return Job("j", "q", 1, **constraints)


def term(*expressions, fields=()):
    return {"match_expressions": list(expressions), "match_fields": list(fields)}


def expr(key, op, *values):
    return {"key": key, "operator": op, "values": list(values)}


def test_no_constraint_is_none_and_admits_untainted_nodes():
    assert constraints_of(job()) is None and admits(NODE, None)


@pytest.mark.parametrize("expression,holds", [
    (expr("zone", "In", "a", "b"), True), (expr("zone", "In", "b"), False),
    (expr("zone", "NotIn", "b"), True), (expr("zone", "NotIn", "a"), False),
    (expr("rack", "NotIn", "r1"), True),  # a missing label is not in any set
    (expr("zone", "Exists"), True), (expr("rack", "Exists"), False),
    (expr("rack", "DoesNotExist"), True), (expr("zone", "DoesNotExist"), False),
    (expr("gpus", "Gt", "4"), True), (expr("gpus", "Gt", "8"), False),
    (expr("gpus", "Lt", "9"), True), (expr("gpus", "Lt", "8"), False),
    (expr("zone", "Gt", "1"), False),  # not a number: no match
    (expr("rack", "Lt", "1"), False),
])
def test_affinity_operators(expression, holds):
    assert admits(NODE, constraints_of(job(node_affinity=[term(expression)]))) is holds


def test_expressions_of_a_term_are_anded_and_terms_ored():
    both = term(expr("zone", "In", "a"), expr("class", "In", "a100"))
    assert not admits(NODE, constraints_of(job(node_affinity=[both])))
    assert admits(NODE, constraints_of(job(node_affinity=[both, term(expr("class", "In", "h100"))])))


def test_match_fields_on_the_node_name():
    pinned = job(node_affinity=[term(fields=[expr("metadata.name", "In", "gpu-7")])])
    elsewhere = job(node_affinity=[term(fields=[expr("metadata.name", "NotIn", "gpu-7")])])
    assert admits(NODE, constraints_of(pinned)) and not admits(NODE, constraints_of(elsewhere))


def test_node_selector_needs_every_label():
    assert admits(NODE, constraints_of(job(node_selector={"zone": "a", "class": "h100"})))
    assert not admits(NODE, constraints_of(job(node_selector={"zone": "a", "class": "a100"})))


TAINTED = Node("t", 8, taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
                               {"key": "soft", "effect": "PreferNoSchedule"}])


@pytest.mark.parametrize("toleration,tolerated", [
    ({"key": "dedicated", "operator": "Equal", "value": "ml"}, True),
    ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"}, True),  # Equal is the default
    ({"key": "dedicated", "operator": "Equal", "value": "web"}, False),
    ({"key": "dedicated", "operator": "Exists"}, True),
    ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),  # another effect
    ({"operator": "Exists"}, True),  # an empty key with Exists tolerates everything
    ({"key": "other", "operator": "Exists"}, False),
])
def test_tolerations_against_blocking_taints(toleration, tolerated):
    assert admits(TAINTED, constraints_of(job(tolerations=[toleration]))) is tolerated


def test_a_prefer_no_schedule_taint_alone_blocks_nothing():
    assert admits(Node("p", 8, taints=[{"key": "soft", "effect": "PreferNoSchedule"}]), None)
    assert not admits(TAINTED, None)


def test_unmet_says_which_constraint_no_node_meets():
    nodes = [NODE, TAINTED]
    assert unmet(job(node_selector={"zone": "z"}), nodes) == "no node matches its node selector zone=z"
    assert unmet(job(node_affinity=[term(expr("zone", "In", "z"))]), nodes) == \
        "no node matches its required node affinity"
    assert unmet(job(node_selector={"zone": "a"}), [Node("n", 8, labels={"zone": "a"}, taints=TAINTED.taints)]) == \
        "every node it selects has a taint it does not tolerate (dedicated=ml:NoSchedule)"
    assert unmet(job(), nodes) is None
    assert unmet(job(), [TAINTED]) == "every node has a taint it does not tolerate (dedicated=ml:NoSchedule)"


def test_queue_users_by_name_and_by_label():
    open_ = Queue("open")
    named = Queue("named", namespaces=["ml"])
    labelled = Queue("labelled", namespace_selector={"matchLabels": {"team": "a"}})
    assert may_use(open_, None, None) and may_use(named, "ml", None) and not may_use(named, "web", {"team": "a"})
    assert may_use(labelled, "web", {"team": "a"}) and not may_use(labelled, "web", {"team": "b"})
    assert not may_use(labelled, "web", None) and not may_use(named, None, None)


def test_namespace_from_the_field_or_the_name():
    assert namespace_of(Job("ml/train", "q", 1)) == "ml"
    assert namespace_of(Job("train", "q", 1, namespace="ml")) == "ml"
    assert namespace_of(Job("train", "q", 1)) is None
