"""GPU composition in the integer program: attach pool GPUs so that waiting work starts,
give idle attached GPUs back (issue 13; docs/composition.md, docs/policy.md).

Composable nodes are few, so each is detailed and has its own variables; the program's
size does not grow with the pool's:
  attach[n, m]  pool GPUs of model m attached to composable node n, 0 to `attachable`
  pick[n, m]    on a node without GPUs or model (it takes any): 1 for the one model it takes
  detach[n, k]  1 if the k-th highest attached GPU of n goes back to the pool; only GPUs
                that are free, healthy and idle (DCGM telemetry) for `idle_detach_s`, and
                the highest first (attached GPUs are a node's highest indices)
The program sees a composable node with a free slot for each GPU it could take beyond its
own (`extend`), so replicas are placed there as anywhere else; its capacity row counts
its GPUs now plus attached less detached (`program.Growth`), and a fraction on a slot
beyond them needs the attach to reach that slot.

Which remedy comes first is the program's stage order (the ranks of the stages): the `attach`
stage (fewest GPUs attached) comes after the stages that minimise preemption, and before
`moves`, so free GPUs and moves come first and preemption last; with `before_preemption:
false` the attach variables are held at 0 until `starts` (`after_reclaim`). The `detach`
stage (most idle GPUs given back) comes after `starts`, `attach` and `moves`, so a GPU
that waiting work could use stays.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from collections.abc import Mapping

from gpu_policy.model import EPS, Composable, Job, Node
from gpu_policy.model.composition import attachable, node_takes, uses_new_gpus
from gpu_policy.model.layout import GpuSlot, Layout, NodeLayout
from gpu_policy.model.plan import Composition, JobDecision
from gpu_policy.model.signals import ClusterSignals
from gpu_policy.model.telemetry import GpuKey
from gpu_policy.planner.core.codes import Reason, gpu_count
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.judged import Judged
from gpu_policy.planner.core.linear import affine
from gpu_policy.planner.core.program import Growth, PlanProgram
from gpu_policy.planner.core.rule import PlanInputs, Rule, Stage
from gpu_policy.planner.core.scope import Scope
from gpu_policy.planner.core.shapes import NodeKind, Shape, node_kind


@dataclass
class Spot:
    """A composable node as the plan sees it."""

    node: Node
    max_gpus: int
    rooms: dict[str, int]                # model -> GPUs it can take now (`attachable`), only models with room
    idle: list[tuple[int, float]] = field(default_factory=list)  # (GPU, seconds idle) it may give back, highest first

    @property
    def room(self) -> int:
        return max(self.rooms.values(), default=0)


@dataclass
class After:
    """A composable node after the plan."""

    gpus: int
    model: str | None
    attached: int = 0
    detached: int = 0


def idle_attached(nl: NodeLayout, attached: int, signals: ClusterSignals | None, idle_detach_s: float
                  ) -> list[tuple[int, float]]:
    """The attached GPUs that may go back to the pool, highest index first: free, healthy,
    and idle (DCGM) for at least `idle_detach_s`. A detach gives back the highest GPUs, so
    the run stops at the first that may not go. Without telemetry nothing is idle."""
    out: list[tuple[int, float]] = []
    if signals is None:
        return out
    top = len(nl.slots)
    for i in range(top - 1, top - 1 - attached, -1):
        g = signals.gpus.get(GpuKey(nl.node.name, i))
        if not (nl.slots[i].free and nl.healthy(i) and g is not None and g.status == "ok" and g.idle
                and g.idle_for_s is not None and g.idle_for_s >= idle_detach_s):
            break
        out.append((i, g.idle_for_s))
    return out


class GpuComposition(Rule):
    """Composition for one plan, the program's rule for composable nodes: the nodes, their
    variables and rows, the attach and detach stages, what the plan decided for them and the
    reasons. Without a `composable:` section every method leaves the plan alone."""

    name = "composition"
    codes = {"WaitingForComposition": "starts on GPUs the plan attaches to a composable node, once they are attached"}
    #: Where its stages rank: attaching after the starts (free GPUs and reclaim come first),
    #: detaching after the moves (a GPU waiting work could use stays).
    ATTACH, DETACH = 70, 90

    def __init__(self, inputs: PlanInputs):
        super().__init__(inputs)
        s, layout, signals = inputs.scenario, inputs.layout, inputs.signals
        self.settings: Composable = s.composable or Composable()
        self.spots: dict[str, Spot] = {}
        nodes = {n.name: n for n in s.nodes}
        for c in self.settings.nodes:
            node = nodes[c.name]
            rooms = {p.model: attachable(s, c.name, p.model) for p in self.settings.pools}
            spot = Spot(node, c.max_gpus, {m: r for m, r in rooms.items() if r > 0},
                        idle_attached(layout.nodes[c.name], c.attached, signals, self.settings.idle_detach_s))
            if spot.rooms or spot.idle:
                self.spots[c.name] = spot
        self.attach: dict[str, dict[str, object]] = {}  # node -> model -> attach variable
        self.picks: dict[str, dict[str, object]] = {}   # node -> model -> pick binary (nodes without a model)
        self.detach: dict[str, list] = {}               # node -> detach binaries, highest GPU first
        self.after: dict[str, After] = {}
        self.pool_after: dict[str, int] = {p.model: p.free for p in self.settings.pools}

    # -- before the program ------------------------------------------------------------------

    def detail(self) -> set[str]:
        """The composable nodes: each needs its own variables."""
        return set(self.spots)

    def grow_kinds(self, kinds: Counter[NodeKind], constraints: frozenset | None) -> Counter[NodeKind]:
        """The cluster's node `kinds` with every composable node as it could be: one kind per
        model it may take, with the GPUs it could reach (for what could ever fit).
        `constraints`: the scenario's (shapes.scenario_constraints), which the planner shares."""
        kinds = Counter(kinds)
        for spot in self.spots.values():
            if not spot.rooms:
                continue
            kind = node_kind(spot.node, constraints)
            kinds[kind] -= 1
            for model, room in spot.rooms.items():
                kinds[dataclasses.replace(kind, gpu_model=model, healthy=kind.healthy + room)] += 1
        return +kinds

    def extend(self, layout: Layout) -> Layout:
        """`layout` with a free slot on each composable node for every GPU it could take."""
        if not any(spot.room for spot in self.spots.values()):
            return layout
        nodes = dict(layout.nodes)
        for n, spot in self.spots.items():
            if spot.room:
                nodes[n] = NodeLayout(layout.nodes[n].node, layout.nodes[n].slots + [GpuSlot() for _ in range(spot.room)])
        return Layout(nodes, layout.indices, layout.hosts)

    def widen(self, sc: Scope) -> None:
        """Open the GPUs a composable node could take to new fractions, as many as there are
        fractional replicas to place (its own free GPUs come first: the program opens free
        GPUs in index order)."""
        items = sum(j.replicas for j in sc.waiting + sc.movers if j.is_fractional)
        for n, spot in self.spots.items():
            if items and spot.room and n in sc.detailed:
                first = spot.node.gpus
                sc.fraction_gpus[n] = sorted(set(sc.fraction_gpus.get(n, ())) |
                                             set(range(first, first + min(spot.room, items))))

    def fits(self, shape: Shape, n: str) -> bool:
        """Could one replica of `shape` run on composable node `n` once GPUs are attached?"""
        spot = self.spots.get(n)
        if spot is None:
            return False
        return any(shape.fits(dataclasses.replace(spot.node, gpus=spot.node.gpus + room, gpu_model=model))
                   for model, room in spot.rooms.items())

    # -- in the program ------------------------------------------------------------------------

    def variables(self, ctx: PlanContext) -> None:
        """The variables and the pool's rows (the capacity rows read what they add)."""
        self.add_variables(ctx.m)

    def rows(self, ctx: PlanContext) -> None:
        """The rows on placements, once the capacity rows have placed the replicas."""
        if ctx.m.growth is not None:
            self.add_placement_rows(ctx.m)

    def stages(self, ctx: PlanContext) -> list[Stage]:
        return [Stage(self.ATTACH, lambda: self._attach_stage(ctx)),
                Stage(self.DETACH, lambda: [("detach", self.detached())])]

    def _attach_stage(self, ctx: PlanContext) -> list:
        """Fewest GPUs attached; with `before_preemption: false`, none before `starts`."""
        stage = [("attach", self.attached())]
        if not self.settings.before_preemption:
            self.after_reclaim(ctx.m, ctx.credits, "starts")
        return stage

    def add_variables(self, m: PlanProgram) -> None:
        """attach, pick and detach variables, the pool's rows; hands the program its `Growth`."""
        if not self.spots:
            return
        growth = Growth(self.fits, attach_first=self.settings.before_preemption)
        by_model: dict[str, dict] = defaultdict(dict)
        for n, spot in self.spots.items():
            if spot.rooms:
                mine = self.attach[n] = {model: m.var("attach", 0, room, "Integer", 0)
                                         for model, room in spot.rooms.items()}
                growth.attach[n] = list(mine.values())
                growth.room[n] = spot.room
                for model, v in mine.items():
                    by_model[model][v] = 1
                if len(mine) > 1:  # a node without GPUs or model: the one model it takes
                    picks = self.picks[n] = {model: m.binary("pick", 0) for model in mine}
                    for model, v in mine.items():
                        # attach[n,m] <= room[n,m] * pick[n,m]
                        m.add(affine({v: 1, picks[model]: -spot.rooms[model]}) <= 0, "pick")
                    m.add(affine({p: 1 for p in picks.values()}) <= 1, "pick")
            if spot.idle:
                gone = self.detach[n] = [m.binary("detach", 0) for _ in spot.idle]
                growth.detach[n] = gone
                for higher, lower in zip(gone, gone[1:]):
                    # the highest attached GPU goes first: detach[n,k] >= detach[n,k+1]
                    m.add(affine({higher: 1, lower: -1}) >= 0, "detach_order")
                if spot.rooms:
                    # a node does not attach and detach in one plan: attached <= room * (1 - detach[n,0])
                    m.add(affine({**{v: 1 for v in growth.attach[n]}, gone[0]: spot.room}) <= spot.room,
                          "attach_or_detach")
        for model, terms in by_model.items():
            # GPUs of model m attached, over all nodes <= what the pool has free
            m.add(affine(terms) <= self.settings.pool(model).free, "pool")
        m.growth = growth

    def add_placement_rows(self, m: PlanProgram) -> None:
        """After the capacity rows: fractions on GPUs yet to attach or about to go back, and
        the model of a node that takes any."""
        for (n, i), (terms, const) in m.placement.shared.items():
            spot = self.spots.get(n)
            if spot is not None and terms:
                self._slot_rows(m, spot, n, i, terms, const)
        for n, picks in self.picks.items():
            self._model_rows(m, n, picks)

    def _slot_rows(self, m: PlanProgram, spot: Spot, n: str, i: int, terms: dict, const: float) -> None:
        """A fraction on GPU i of composable node n (shared[n,i] = terms + const) needs the
        GPU attached, and a GPU going back takes none."""
        if i >= spot.node.gpus and n in self.attach:
            # (i - gpus[n] + 1) * shared[n,i] <= GPUs attached to n: the slot must exist
            m.add(affine({**{v: i - spot.node.gpus + 1 for v in terms},
                          **{v: -1 for v in self.attach[n].values()}}) <= 0, "attach_reach")
        for (gpu, _), gone in zip(spot.idle, self.detach.get(n, ())):
            if gpu == i:
                # shared[n,i] + detach[n,i] <= 1: a GPU going back takes no fraction
                m.add(affine({**terms, gone: 1}) <= 1 - const, "detach_free")

    def _model_rows(self, m: PlanProgram, n: str, picks: dict) -> None:
        """Replicas on node n, which takes any model, only of shapes that accept the model it picks."""
        placed = [(shape, v) for (node, shape), v in m.placement.whole.items() if node == n]
        placed += [(shape, v) for (node, _, shape), v in m.placement.frac.items() if node == n]
        for shape, v in placed:
            allowed = [p for model, p in picks.items() if shape.models is None or model in shape.models]
            if len(allowed) < len(picks):
                # replicas of a shape on n <= most * (picks of the models it accepts)
                m.add(affine({v: 1, **{p: -v.upBound for p in allowed}}) <= 0, "model")

    def after_reclaim(self, m: PlanProgram, credit: dict, release: str) -> None:
        """`before_preemption: false`: nothing is attached in the stages before `release`,
        which therefore reclaim as if there were no pool; then GPUs attached are no more
        than the GPUs of claims (starts within fair share, `rules.claims.Credit`), so work
        beyond its share never gets GPUs attached (the victims of reclaim would get them
        in the next plan)."""
        attach = [v for mine in self.attach.values() for v in mine.values()]
        if not attach:
            return
        m.held[release] = attach
        claimed = {v: -g for c in credit.values() for v, g in c.claimed.items()}
        # GPUs attached <= GPUs of claims
        m.add(affine({**{v: 1 for v in attach}, **claimed}) <= 0, "attach_for_claims")

    def attached(self):
        """The `attach` stage: fewest GPUs attached."""
        return affine({v: 1 for mine in self.attach.values() for v in mine.values()})

    def detached(self):
        """The `detach` stage: most idle attached GPUs given back."""
        return affine({v: -1 for gone in self.detach.values() for v in gone})

    # -- after the program -----------------------------------------------------------------

    def decide(self, m: PlanProgram, layout: Layout, decided: bool) -> None:
        """What the plan does to each composable node, from where the started and moved
        replicas landed in `layout` (the cluster after the plan): a node gets exactly the
        GPUs its highest new replica reaches, never more than the started work needs. Idle
        GPUs go back when the program was solved to its end (`decided`), or when it had
        nothing to start. Trims `layout` to the GPUs each composable node has after the plan."""
        for n, spot in self.spots.items():
            nl = layout.nodes[n]
            first = spot.node.gpus
            used = [i for i in range(first, len(nl.slots)) if not nl.slots[i].free]
            attach = used[-1] + 1 - first if used else 0
            detach = 0
            if not attach and decided and spot.idle:
                gone = self.detach[n] if m.growth is not None else None
                detach = len(spot.idle) if gone is None else sum(round(v.varValue or 0) for v in gone)
            model = spot.node.gpu_model or (self._model_taken(n) if attach else None)
            after = self.after[n] = After(first + attach - detach, model, attach, detach)
            layout.nodes[n] = NodeLayout(dataclasses.replace(spot.node, gpus=after.gpus, gpu_model=model),
                                         nl.slots[:after.gpus])
            if attach:
                self.pool_after[model] -= attach

    def _model_taken(self, n: str) -> str:
        """The model a node without one takes: its attach variable that is on."""
        return next(model for model, v in self.attach[n].items() if (v.varValue or 0) > 0.5)

    def report(self, decisions: list[JobDecision], jobs: Mapping[str, Job]) -> list[Composition]:
        """The plan's compositions, each with its reason; a start or move onto GPUs being
        attached says so, and when they come. `decisions`: the plan's, or only those other
        than keep; `jobs`: by name, at least those that start or move."""
        if not self.after:  # no composable node changes: nothing to report, no reason to change
            return []
        result = []
        usable = {n: spot.node.gpus for n, spot in self.spots.items()}
        on_new = {d.name: sorted(uses_new_gpus(d, usable)) for d in decisions if d.action in ("start", "move")}
        for n, after in self.after.items():
            if after.attached:
                result.append(Composition(n, after.model, after.attached,
                                          self._attach_reason([jobs[name] for name, mine in on_new.items()
                                                               if n in mine], after.attached)))
            if after.detached:
                idle_s = min(s for _, s in self.spots[n].idle[:after.detached])
                result.append(Composition(n, after.model, -after.detached, (
                    f"idle for {idle_s / 60:.0f} min (idle_detach_s: {self.settings.idle_detach_s / 60:g} min); "
                    f"no waiting job can use {'it' if after.detached == 1 else 'them'}")))
        for d in decisions:
            nodes = on_new.get(d.name)
            if nodes:
                parts = " and ".join(f"{self.after[n].attached} {self.after[n].model} "
                                     f"{'is' if self.after[n].attached == 1 else 'are'} attached to {n}" for n in nodes)
                when = f"when {parts}, about {self.settings.attach_seconds:g} s"
                why = _on_new_gpus(when, d.action, d.reason)
                d.reason, d.code = why.text, why.code
        return result

    def _attach_reason(self, jobs: list[Job], gpus: int) -> str:
        names = ", ".join(f"{j.name} ({_size(j)})" for j in jobs)
        verb, them = ("starts", "it") if len(jobs) == 1 else ("start", "them")
        start = f"{names} {verb} on {'it' if gpus == 1 else 'them'}"
        if self.settings.before_preemption:
            return f"{start}: free GPUs and moves could not hold {them}, and attaching comes before preemption"
        return f"{start}: free GPUs, moves and reclaim could not hold {them}"

    def room_clause(self, job: Job, judged: Judged) -> str | None:
        """Why attaching GPUs did not make room for a job that waits for room (None: it
        could have, and the rules kept it waiting). A job that needs more CPUs or memory
        than any composable node has left needs a new node."""
        if not self.settings.nodes:
            return None
        spare, layout = judged.spare, judged.layout
        takers = {c.name: self._rooms_after(c.name, layout, job) for c in self.settings.nodes}
        takers = {n: rooms for n, rooms in takers.items() if rooms}
        if not takers:
            return None
        for resource, unit in (("cpu", "CPUs"), ("memory_gib", "GiB of memory")):
            want = getattr(job, resource) or 0
            left = {n: spare[n][resource] for n in takers if resource in spare[n]}
            if want and len(left) == len(takers) and max(left.values()) + EPS < want:
                most = max(left, key=lambda n: (left[n], n))
                return (f"needs a new node: attaching GPUs cannot help, no composable node has {want:g} {unit} "
                        f"free (the most is {left[most]:g}, on {most})")
        need = 1 if job.is_fractional else job.gpus
        reach = {n: len(layout.nodes[n].free_indices()) + max(rooms.values()) for n, rooms in takers.items()}
        best = max(reach, key=lambda n: (reach[n], n))
        if reach[best] >= need:
            return None
        return (f"attaching cannot help: a composable node could offer at most {reach[best]} free GPUs "
                f"({self._limit(best, layout, takers[best])})")

    def _rooms_after(self, n: str, layout: Layout, job: Job) -> dict[str, int]:
        """Per model the job accepts that node n takes, the GPUs it could still take after
        the plan (0 for a node that gives GPUs back in this plan)."""
        node = layout.nodes[n].node
        limit = self.settings.node(n).max_gpus
        models = [mdl for mdl in self.pool_after if node_takes(node, mdl)]
        gone = n in self.after and self.after[n].detached
        return {mdl: 0 if gone else max(0, min(limit - node.gpus, self.pool_after.get(mdl, 0)))
                for mdl in models if not job.gpu_model or mdl in job.gpu_model}

    def _limit(self, n: str, layout: Layout, rooms: dict[str, int]) -> str:
        limit = self.settings.node(n).max_gpus
        if layout.nodes[n].node.gpus >= limit:
            return f"{n} is at its max_gpus of {limit}"
        pools = ", ".join(f"{self.pool_after.get(model, 0)} {model}" for model in sorted(rooms))
        return f"{n} may hold {limit} GPUs, and the pool has {pools} free"


def _size(job: Job) -> str:
    one = gpu_count(job.gpus)
    return one if job.replicas == 1 else f"{job.replicas} x {one}"


def _on_new_gpus(when: str, action: str, reason: str) -> Reason:
    """A start or move onto GPUs the plan attaches: it happens `when` they are attached (a
    move keeps the moves rule's code)."""
    if action == "start":
        return Reason("WaitingForComposition", f"starts {when}")
    return Reason("MovedToDefragment", f"{reason}; {when}")
