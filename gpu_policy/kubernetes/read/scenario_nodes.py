"""A look's nodes -> the scenario's nodes (gpu_policy.kubernetes.read.snapshot), kept from look to
look: each made again only when its view, what its pods use there or the labels some job or level
selects changed. What it decides where the contract is silent:

- A node that takes no new work (cordoned, not Ready) keeps its running jobs; all its
  GPUs are marked unhealthy (no new work), and its labels say why. A tainted node keeps
  its taints: it takes the jobs that tolerate them. Of its labels, the snapshot keeps
  those some job's node selector or affinity looks at, and those of the topology levels
  (but kubernetes.io/hostname: a level of it is the node itself).
- CPU and memory left for GPU jobs are the node's allocatable minus what its
  non-GPU pods request.
- A node with no GPUs, none held and none to come (not composable) is left out; a composable
  node is kept even with no GPUs: composition may give it some.
- GPU index annotations that collide or point past a node's GPUs are dropped for that node
  (`bad_indices`).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from functools import lru_cache
from operator import attrgetter

from gpu_policy.kubernetes.names import HOSTNAME_LABEL, NO_NEW_WORK_LABEL
from gpu_policy.kubernetes.read.devices import Devices
from gpu_policy.kubernetes.read.isolate import largest_offers
from gpu_policy.kubernetes.read.kept import Diff
from gpu_policy.kubernetes.read.kept_jobs import Jobs
from gpu_policy.kubernetes.read.nodes import NodeView
from gpu_policy.kubernetes.read.pod_jobs import rounded
from gpu_policy.kubernetes.read.pod_view import PodView
from gpu_policy.model import Job, Node, TopologyLevel


class NodeFacts:
    """What a look reads of all its nodes at once, found again only when a node changed: the
    nodes by name and in natural order, their devices, the largest offers, the GPUs in all and
    the composable nodes (in the order given); `changed`: the nodes changed since the last look."""

    def __init__(self):
        self._diff = Diff(attrgetter("name"))
        self.views: dict[str, NodeView] = {}
        self.names: frozenset[str] = frozenset()
        self.natural: list[str] = []
        self.devices = Devices()
        self.most: dict[str, float] = {}
        self.gpus = 0
        self.composable: list[str] = []
        self.changed: set[str] = set()

    def update(self, nodes: list[NodeView]) -> NodeFacts:
        """The facts of `nodes` (what did not change is the object it was: a look compares it at once)."""
        self.changed = set(self._diff(nodes))
        if not self.changed:
            return self
        self.views = {n.name: n for n in nodes}
        if self.names != self.views.keys():
            self.names = frozenset(self.views)
            self.natural = sorted(self.names, key=natural)
        for attr, value in (("devices", Devices.of(nodes)), ("most", largest_offers(nodes))):
            if getattr(self, attr) != value:
                setattr(self, attr, value)
        self.gpus = sum(n.gpus for n in nodes)
        self.composable = [n.name for n in nodes if n.max_gpus is not None]
        return self


class ScenarioNodes:
    """The scenario's nodes as the last look made them: node -> (what it was made from, the node
    or None when left out, its warnings); the nodes whose GPU indices are dropped."""

    def __init__(self):
        self.made: dict[str, tuple[tuple, Node | None, tuple[str, ...]]] = {}
        self.bad: set[str] = set()
        self.said: set[str] = set()  # the nodes that have warnings
        self._selected: list[str] | None = None
        self._facts: NodeFacts | None = None  # the facts of the last look (of the nodes as composed, or not)
        self._listed: list[Node] = []  # the nodes made, in natural order
        self._at: dict[str, int] = {}  # node -> its place in _listed
        self._natural: list[str] | None = None  # the order _listed follows

    def update(self, facts: NodeFacts, jobs: Jobs, others: dict[str, dict], moved: set[str],
               topology: list[TopologyLevel], warnings: list[str]) -> tuple[list[Node], set[str]]:
        """The scenario's nodes in natural order (their warnings added to `warnings`), and the
        names of those made anew; `facts`: the nodes planned (a look's, or the same as composed:
        the last look's facts or others make every node again); `others`: node -> its pods that
        ask for no GPU; `moved`: the nodes whose such pods changed."""
        # the labels jobs select by, and the levels' (a level labelled kubernetes.io/hostname is the node itself)
        selected = sorted(set(jobs.labels) | ({level.label for level in topology} - {HOSTNAME_LABEL}))
        dirty = facts.changed | jobs.moved | moved
        if selected != self._selected or facts is not self._facts:  # every node made again
            self._selected, self._facts, dirty = selected, facts, set(facts.views) | set(self.made)
        remade, running = set(), {}
        for name in sorted(dirty, key=natural):  # in order, as a plan reads them; each node's jobs in theirs
            running[name] = [jobs.built[job] for job in jobs.running_on(name)]
            if self._make(name, facts.views.get(name), running[name], others.get(name, {}), selected):
                remade.add(name)
        self._list(facts.natural, remade)
        warnings += [line for name in sorted(self.said, key=natural) for line in self.made[name][2]]
        for name in remade | jobs.moved:
            made = self.made.get(name)
            (self.bad.add if made and made[1] is not None and bad_indices(made[1], running[name])
             else self.bad.discard)(name)
        return list(self._listed), remade

    def _list(self, natural: list[str], remade: set[str]) -> None:
        """The nodes made, in natural order: those made anew put in their places, or (a node
        left out or back, or another set of nodes) listed again."""
        if natural is self._natural and all((name in self._at) == (self.made[name][1] is not None)
                                             for name in remade if name in self.made):
            for name in remade:
                if name in self._at:
                    self._listed[self._at[name]] = self.made[name][1]
            return
        self._natural = natural
        self._listed = [made[1] for made in map(self.made.get, natural) if made and made[1] is not None]
        self._at = {node.name: i for i, node in enumerate(self._listed)}

    def _make(self, name: str, v: NodeView | None, running: list[Job], others: dict, selected: list[str]) -> bool:
        """Make the node again when what it is made from changed; whether it did."""
        self.said.discard(name)
        if v is None:
            return self.made.pop(name, None) is not None
        used = (*_usage(name, running), *_others(others), tuple((k, v.labels[k]) for k in selected if k in v.labels))
        kept = self.made.get(name)
        if kept is not None and kept[0] == (v, *used):
            if kept[2]:
                self.said.add(name)
            return False
        if v.gpus == 0 and not used[0] and v.max_gpus is None:
            self.made[name] = ((v, *used), None, ())  # no GPUs, and none to come: nothing to plan there
            return True
        said: list[str] = []
        self.made[name] = ((v, *used), _node(v, *used, said), tuple(said))
        if said:
            self.said.add(name)
        return True


def _usage(name: str, running: list[Job]) -> tuple[float, float, float]:
    """The GPUs the jobs running on the node hold, and the CPU and memory they need (added in
    the scenario's order)."""
    held = cpu = memory = 0.0
    for job in running:
        for n in job.running:
            if n == name:
                held += job.gpus
                cpu += job.cpu or 0
                memory += job.memory_gib or 0
    return held, cpu, memory


def _others(others: dict) -> tuple[float, float]:
    """The CPU and memory the node's pods that ask for no GPU take (added in the pods' order)."""
    cpu = memory = 0.0
    for key in sorted(others):
        p: PodView = others[key]
        cpu += p.cpu or 0
        memory += p.memory_gib or 0
    return cpu, memory


def _node(v: NodeView, held: float, cpu_need: float, memory_need: float, cpu_others: float, memory_others: float,
          selectable: tuple[tuple[str, str], ...], warnings: list[str]) -> Node:
    """One node of the scenario: its view, less what its pods that ask for no GPU take, with the
    labels of it some job selects."""
    gpus, unhealthy, labels = v.gpus, list(v.unhealthy_gpus), {}
    if held > v.gpus + 1e-9:
        warnings.append(f"node {v.name}: its pods hold {held:g} GPUs but it offers {v.gpus}: "
                        "planned full, with no new work")
        gpus, labels[NO_NEW_WORK_LABEL] = math.ceil(held), "overcommitted"
    if v.no_new_work:
        labels[NO_NEW_WORK_LABEL] = v.no_new_work
    if labels:
        unhealthy = list(range(gpus))
    labels.update(selectable)
    capacity = {}
    for resource, total, others, need in (("cpu", v.cpu, cpu_others, cpu_need),
                                          ("memory_gib", v.memory_gib, memory_others, memory_need)):
        if total is not None:  # what non-GPU pods leave, never less than the GPU jobs there already use
            capacity[resource] = rounded(max(total - others, need))
    return Node(name=v.name, gpus=gpus, gpu_model=v.gpu_model, cpu=capacity.get("cpu"),
                memory_gib=capacity.get("memory_gib"), labels=labels, unhealthy_gpus=unhealthy,
                taints=list(v.taints), gpu_sharing=v.sharing, mig=dict(v.mig))


def bad_indices(node: Node, running: list[Job]) -> bool:
    """Whether the GPU index annotations of the jobs running on the node (in the scenario's
    order) collide or point past its GPUs (they are dropped for that node)."""
    use: dict[int, float] = defaultdict(float)
    for job in running:
        for on, ix in zip(job.running, job.gpu_indices or []):
            if on != node.name:
                continue
            want = 1 if job.is_fractional else int(job.gpus)
            if len(ix) != want or len(set(ix)) != len(ix) or any(i >= node.gpus for i in ix):
                return True
            for i in ix:
                use[i] += job.gpus if job.is_fractional else 1.0
                if use[i] > 1 + 1e-9:
                    return True
    return False


@lru_cache(maxsize=1 << 16)
def natural(name: str) -> tuple:
    """node-2 before node-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
