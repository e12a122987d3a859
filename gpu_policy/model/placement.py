"""Where a job may run, and who may use a queue: the one home of both rules.

A job's node selector, required node-affinity terms and tolerations against a node's
taints decide, as Kubernetes decides them, whether one of its replicas may ever run on
the node (`admits`). A queue that lists `namespaces` or a `namespace_selector` admits
only jobs of those namespaces (`may_use`). The planner asks these functions and no other
code repeats them (docs/scenario.md, "Placement constraints", "Who may use a queue").
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_policy.model.scenario import Job, Node, Queue, Scenario

#: Node-affinity operators on labels, and on fields (only `metadata.name` can be matched).
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
#: Effects that keep a pod off a node unless tolerated (PreferNoSchedule only discourages).
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
NAME_FIELD = "metadata.name"


@dataclass(frozen=True)
class Constraints:
    """A job's placement constraints in hashable form: jobs with equal constraints are
    alike for placement (`gpu_policy.planner.shapes.Shape` carries one)."""

    selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[tuple[tuple, tuple], ...] | None = None  # ORed; each (label expressions, field expressions)
    tolerations: tuple[tuple[str, str, str, str], ...] = ()  # (key, operator, value, effect)

    def matches(self, node: Node) -> bool:
        """Node selector and node affinity (not taints) hold on `node`."""
        labels = node.labels
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        return self.terms is None or any(_term(node, labels, t) for t in self.terms)

    def tolerates(self, taint: dict) -> bool:
        return any(_tolerates(t, taint) for t in self.tolerations)


def constraints_of(job: Job) -> Constraints | None:
    """The job's constraints, or None when it has none (the common case costs nothing)."""
    if not (job.node_selector or job.node_affinity or job.tolerations):
        return None
    terms = None
    if job.node_affinity:
        terms = tuple((tuple(_expression(e) for e in t.get("match_expressions") or ()),
                       tuple(_expression(e) for e in t.get("match_fields") or ())) for t in job.node_affinity)
    return Constraints(tuple(sorted(job.node_selector.items())), terms,
                       tuple((t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""), t.get("effect", ""))
                             for t in job.tolerations))


def _expression(e: dict) -> tuple[str, str, tuple[str, ...]]:
    return e["key"], e["operator"], tuple(e.get("values") or ())


def _term(node: Node, labels: dict[str, str], term: tuple) -> bool:
    """All expressions of one term hold (an empty term matches no node, as in Kubernetes)."""
    expressions, fields = term
    if not expressions and not fields:
        return False
    return (all(_label_holds(labels, *e) for e in expressions)
            and all((node.name in values) == (op == "In") for _, op, values in fields))


def _label_holds(labels: dict[str, str], key: str, op: str, values: tuple[str, ...]) -> bool:
    value = labels.get(key)
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    number = _integer(value)  # Gt, Lt: the label and the one value compared as integers
    if number is None:
        return False
    return number > int(values[0]) if op == "Gt" else number < int(values[0])


def _integer(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _tolerates(t: tuple[str, str, str, str], taint: dict) -> bool:
    key, op, value, effect = t
    if effect and effect != taint.get("effect"):
        return False
    if not key:  # an empty key with Exists tolerates every taint
        return op == "Exists"
    if key != taint.get("key"):
        return False
    return op == "Exists" or value == (taint.get("value") or "")


def blocking_taints(node: Node) -> list[dict]:
    return [t for t in node.taints if t.get("effect") in BLOCKING_EFFECTS]


def admits(node: Node, c: Constraints | None) -> bool:
    """Whether a replica with constraints `c` may ever run on `node`: selector and
    affinity hold, and every NoSchedule/NoExecute taint of the node is tolerated."""
    if c is None:
        return not node.taints or not blocking_taints(node)
    if not c.matches(node):
        return False
    return all(c.tolerates(t) for t in blocking_taints(node))


def unmet(job: Job, nodes: list[Node]) -> str | None:
    """Why no node admits the job, in words, or None when some node does."""
    c = constraints_of(job)
    if any(admits(n, c) for n in nodes):
        return None
    if c is not None and c.selector and not any(all(n.labels.get(k) == v for k, v in c.selector) for n in nodes):
        wanted = ", ".join(f"{k}={v}" for k, v in c.selector)
        return f"no node matches its node selector {wanted}"
    if c is not None and not any(c.matches(n) for n in nodes):
        return "no node matches its required node affinity"
    taints = sorted({_show_taint(t) for n in nodes if c is None or c.matches(n) for t in blocking_taints(n)})
    which = "every node it selects" if c is not None and (c.selector or c.terms) else "every node"
    return f"{which} has a taint it does not tolerate ({', '.join(taints[:3])})"


def _show_taint(t: dict) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key', '')}{value}:{t.get('effect', '')}"


def namespace_of(job: Job) -> str | None:
    """The job's namespace: its `namespace` field, else the part of its name before a `/`."""
    if job.namespace:
        return job.namespace
    prefix, slash, _ = job.name.partition("/")
    return prefix if slash and prefix else None


def restricted(queue: Queue) -> bool:
    return queue.namespaces is not None or queue.namespace_selector is not None


def may_use(queue: Queue, namespace: str | None, labels: dict[str, str] | None) -> bool:
    """Whether a job of `namespace` (whose labels are `labels`) may claim `queue`: any job
    when the queue names no users; else one of its listed namespaces, or one whose labels
    match its selector. A job with no namespace may use only a queue open to all."""
    if not restricted(queue):
        return True
    if namespace is None:
        return False
    if queue.namespaces is not None and namespace in queue.namespaces:
        return True
    wanted = (queue.namespace_selector or {}).get("matchLabels")
    return wanted is not None and labels is not None and all(labels.get(k) == v for k, v in wanted.items())


def refusals(s: Scenario) -> dict[str, str]:
    """Waiting jobs that claim a queue their namespace may not use -> the reason they wait."""
    queues = {q.name: q for q in s.queues if restricted(q)}
    if not queues:
        return {}
    labels = {n.name: n.labels for n in s.namespaces}
    out = {}
    for job in s.jobs:
        queue = queues.get(job.queue)
        namespace = namespace_of(job)
        if queue is not None and not job.is_running and not may_use(queue, namespace, labels.get(namespace)):
            who = f"namespace {namespace}" if namespace else "a job with no namespace"
            out[job.name] = f"not admitted: {who} may not use queue {queue.name}"
    return out
