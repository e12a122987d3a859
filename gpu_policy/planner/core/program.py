"""The integer program and its decisions.

Variables (only where a decision exists; everything else is a constant), named from
indices, never from user strings:
  keep[j]        1 if running candidate j stays where it is          (`Decisions`)
  move[j]        1 if running candidate j restarts elsewhere (all its replicas)
  cut[n, k]      1 if reclaim node n takes its k-th option (preempts its first k victims)
  starts[k]      how many waiting jobs of kind k start (the oldest first; all replicas of
                 a job: gangs are all-or-nothing)
  whole[n, s]    replicas of whole-GPU shape s placed on detailed node n  (`Placements`)
  frac[n, i, s]  replicas of fractional shape s placed on GPU i of detailed node n
  pool[m, s]     replicas of shape s placed on pooled nodes of GPU model m
  receives, gives, inside, largest   GPUs between queues             (`Flows`)
A candidate that neither keeps nor moves is preempted. This module makes the decisions
(`build_decisions`); each rule of `gpu_policy.planner.rules` adds its own variables, rows
and stages (`core.rule.Rule`), writing only its part of the program: `rules.capacity`
the placements, `rules.reclaim` and `rules.inside` the flows. Nodes that may gain or lose
GPUs in the plan (composition) reach the capacity rows through `Growth`, which
the composition rule fills.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import pulp

from gpu_policy.model import Job, Scenario
from gpu_policy.model.layout import per_gpu
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.scope import Scope
from gpu_policy.planner.core.shapes import Kind, NodeKind, Shape, node_kinds, scenario_constraints


@dataclass
class Program:
    """A PuLP problem and its objectives, solved in strict order (`solve_stages`)."""

    prob: pulp.LpProblem
    x: dict = field(default_factory=dict)  # placement options of `gpu_policy.sim`'s window program
    stages: list[tuple[str, pulp.LpAffineExpression]] = field(default_factory=list)
    initial: dict = field(default_factory=dict)  # variable -> value of the do-nothing plan
    held: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # stage -> variables held at 0 before it
    lazy: list[tuple[str, pulp.LpConstraint]] = field(default_factory=list)  # (name, row) the solvers see only once
    # a solution breaks one (`solve_stages`): rows that seldom bind and slow every solve where they are


@dataclass
class Growth:
    """Detailed nodes whose GPUs the plan may change (GPU composition, `rules.composition`).
    Their layout holds a free slot for each GPU they could take, beyond their own."""

    fits: Callable[[Shape, str], bool]  # could one replica of the shape run on the node once GPUs are attached
    attach: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # node -> GPUs attached (per model)
    detach: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # node -> 1 per GPU it gives back
    room: dict[str, int] = field(default_factory=dict)  # node -> most GPUs it could take
    attach_first: bool = True  # before_preemption: a victim that GPUs yet to attach could hold is not preempted

    def added(self, n: str) -> dict:
        """{variable: coefficient}: GPUs node n has after the plan, less the GPUs it has now."""
        return {**{v: 1 for v in self.attach.get(n, ())}, **{v: -1 for v in self.detach.get(n, ())}}

    def for_victims(self, n: str) -> tuple[dict, float]:
        """GPUs beyond its own that node n leaves a victim, as (terms, constant): with
        attaching first, also those it could still take (a victim they hold moves, not goes)."""
        if self.attach_first:
            return {v: -1 for v in self.detach.get(n, ())}, float(self.room.get(n, 0))
        return self.added(n), 0.0


@dataclass
class Decisions:
    """What the plan decides per job (`build_decisions`): keep, move or preempt a running
    candidate, how many of each kind of waiting job start."""

    keep: dict[str, pulp.LpVariable] = field(default_factory=dict)
    move: dict[str, pulp.LpVariable] = field(default_factory=dict)
    cut: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # victim on a reclaim node -> the
    # node's options that preempt it (option k preempts the node's first k victims)
    options: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # reclaim node -> its options
    starts: dict[Kind, pulp.LpVariable] = field(default_factory=dict)
    kinds: dict[Kind, list[Job]] = field(default_factory=dict)  # the jobs of each kind it may start, oldest first
    victims: set[str] = field(default_factory=set)  # candidates that may be preempted
    fraction_gpu: dict[str, int] = field(default_factory=dict)  # moving fractional job -> the GPU it leaves


@dataclass
class Placements:
    """Where started and moved replicas go, and what each node and GPU holds after the plan
    (`rules.fits` writes them; `rules.composition` and `rules.packing` read them)."""

    whole: dict[tuple[str, Shape], pulp.LpVariable] = field(default_factory=dict)
    frac: dict[tuple[str, int, Shape], pulp.LpVariable] = field(default_factory=dict)
    pool: dict[tuple[str | None, Shape], pulp.LpVariable] = field(default_factory=dict)
    started_items: dict[Shape, dict] = field(default_factory=dict)  # shape -> {start[p]: replicas}
    node_used: dict[str, tuple[dict, float]] = field(default_factory=dict)  # detailed node -> GPUs used after
    gpu_used: dict[tuple[str, int], tuple[dict, float]] = field(default_factory=dict)  # shared GPU -> use after
    shared: dict[tuple[str, int], tuple[dict, float]] = field(default_factory=dict)  # GPU -> 1 if shared after


@dataclass
class Flows:
    """GPUs between queues (`rules.reclaim` and `rules.inside` write them; the guarantee
    stages and the reasons read them)."""

    receives: dict[str, dict[str, pulp.LpVariable]] = field(default_factory=dict)  # queue -> tier -> binary
    gives: dict[str, dict[str, pulp.LpVariable]] = field(default_factory=dict)  # queue -> tier -> GPUs given
    inside: dict[str, pulp.LpVariable] = field(default_factory=dict)  # victim -> 1 if preempted for its own queue
    largest: dict[str, dict[float, pulp.LpVariable]] = field(default_factory=dict)  # queue -> size -> 1 if its
    # largest victim given to other queues has that size


@dataclass
class PlanProgram(Program):
    """The planner's program: the decisions it reads back, by job, node and shape, in parts
    that each rule writes its own of."""

    decisions: Decisions = field(default_factory=Decisions)
    placement: Placements = field(default_factory=Placements)
    flows: Flows = field(default_factory=Flows)
    growth: Growth | None = None  # composable nodes (None: no node changes its GPUs)
    counter: int = 0

    def var(self, kind: str, low: float = 0, high: float | None = None, cat: str = "Continuous",
            initial: float | None = None) -> pulp.LpVariable:
        """A new variable named from its kind and an index; `initial`: its do-nothing value."""
        self.counter += 1
        v = self.prob.add_variable(f"{kind}{self.counter}", low, high, cat)  # PuLP's own way: no warning
        if initial is not None:
            self.initial[v] = initial
        return v

    def binary(self, kind: str, initial: float | None = None) -> pulp.LpVariable:
        return self.var(kind, 0, 1, "Binary", initial)

    def add(self, constraint, kind: str, lazy: bool = False) -> None:
        """A row of the program; `lazy`: held back until a solution breaks it (`Program.lazy`)."""
        self.counter += 1
        if lazy:
            self.lazy.append((f"{kind}{self.counter}", constraint))
        else:
            self.prob += constraint, f"{kind}{self.counter}"

    def runs(self, job: Job) -> tuple[dict, float]:
        """'running job runs after the plan' (kept or moved) as (terms, constant)."""
        d, name = self.decisions, job.name
        keep = d.keep.get(name)
        if keep is not None:
            terms = {keep: 1}
            move = d.move.get(name)
            if move is not None:
                terms[move] = 1
            return terms, 0.0
        cut = d.cut.get(name)
        if cut is not None:
            return {w: -1 for w in cut}, 1.0
        return {}, 1.0

    def decided(self) -> set[str]:
        """The running jobs whose running the program decides (kept, moved or cut): `runs`
        of every other running job is the constant 1."""
        return self.decisions.keep.keys() | self.decisions.cut.keys()

    def started(self, which=lambda kind: True) -> dict:
        """{starts[k]: GPUs of one job of kind k} for the kinds `which` admits."""
        return {var: kind.total_gpus for kind, var in self.decisions.starts.items() if which(kind)}

    def preempted(self, job: Job, part: str = "all") -> tuple[dict, float]:
        """'job is preempted' as (terms, constant); `part` "cross" or "inside": preempted for
        another queue, or for its own queue's higher priority."""
        if part == "inside":
            return ({self.flows.inside[job.name]: 1}, 0.0) if job.name in self.flows.inside else ({}, 0.0)
        if job.name in self.decisions.cut:
            terms, const = {w: 1 for w in self.decisions.cut[job.name]}, 0.0
        else:
            terms, const = {self.decisions.keep[job.name]: -1}, 1.0
            if job.name in self.decisions.move:
                terms[self.decisions.move[job.name]] = -1
        if part == "cross" and job.name in self.flows.inside:
            terms[self.flows.inside[job.name]] = -1
        return terms, const


def build_decisions(s: Scenario, sc: Scope, max_moves: int, kinds: Counter[NodeKind] | None = None) -> PlanProgram:
    """keep / move for running candidates, start for waiting jobs (at most as many of each
    kind as could ever fit on `kinds`, default the cluster's nodes), in a fresh program."""
    m = PlanProgram(pulp.LpProblem("gpu_policy_plan", pulp.LpMinimize))
    d = m.decisions
    movers = {j.name for j in sc.movers}
    d.victims = {j.name for j in sc.victims}
    for job in _unique(sc.victims + sc.movers):
        d.keep[job.name] = m.binary("keep", 1)
        if job.name in movers:
            d.move[job.name] = m.binary("move", 0)
            if job.name in d.victims:
                m.add(affine({d.keep[job.name]: 1, d.move[job.name]: 1}) <= 1, "once")
            else:  # not a legal victim: it stays or moves
                m.add(affine({d.keep[job.name]: 1, d.move[job.name]: 1}) == 1, "once")
    if d.move:
        # moves <= max_moves
        m.add(affine({v: 1 for v in d.move.values()}) <= max_moves, "max_moves")
    for n, victims in sc.cuts.items():
        options = [m.binary("cut", 0) for _ in victims]
        d.options[n] = options
        # at most one option per reclaim node: option k preempts its first k victims
        m.add(affine({w: 1 for w in options}) <= 1, "cut")
        for i, job in enumerate(victims):
            d.cut[job.name] = options[i:]
            d.victims.add(job.name)
    waiting = [(job, Kind.of(job, sc.apart)) for job in sorted(sc.waiting, key=lambda j: (j.submitted_at, j.name))]
    room = _room_by_shape([kind.shape for _, kind in waiting], kinds or node_kinds(s, scenario_constraints(s)))
    for job, kind in waiting:
        mine = d.kinds.setdefault(kind, [])
        if len(mine) < room[kind.shape] // job.replicas:  # more could never fit: the rest wait
            mine.append(job)
    for kind, jobs in d.kinds.items():
        if jobs:
            d.starts[kind] = m.var("starts", 0, len(jobs), "Integer", 0)
    return m


def _unique(jobs: list[Job]) -> list[Job]:
    seen: dict[str, Job] = {}
    for j in jobs:
        seen.setdefault(j.name, j)
    return list(seen.values())


def _room_by_shape(shapes: list[Shape], kinds: Counter[NodeKind]) -> dict[Shape, int]:
    """Most replicas of each of the waiting jobs' `shapes` nodes of these kinds could hold at once."""
    out: dict[Shape, int] = {}
    for shape in shapes:
        if shape not in out:
            places = per_gpu(shape.gpus) if shape.fractional else 1
            out[shape] = sum(count * (kind.healthy * places // max(1, shape.whole_gpus))
                             for kind, count in kinds.items() if shape.fits(kind))
    return out
