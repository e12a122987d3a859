"""The Plan: what the planner decided for every job and queue, and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpu_policy.model.scenario import API_VERSION


@dataclass(slots=True)
class Placement:
    """Where one replica runs (or ran, for a preempted job). With `__slots__`, as
    `JobDecision`: a plan makes one per running replica (20,000 at 5,000 nodes)."""

    node: str
    gpus: float
    gpu_indices: list[int]


#: the actions that stop a job where it runs (its victims)
STOPS = ("preempt", "move")


@dataclass(slots=True)
class JobDecision:
    name: str
    queue: str
    action: str  # keep | start | preempt | move | wait
    replicas: list[Placement] = field(default_factory=list)
    reason: str = ""
    code: str = ""  # the reason's stable code (gpu_policy.planner.codes.CODES); "" for keep
    evict_after_s: float | None = None  # a preempt or move at the victim's checkpoint due in this many seconds

    @property
    def stops(self) -> bool:
        """The plan stops it where it runs: a victim, preempted or moved."""
        return self.action in STOPS


@dataclass
class Composition:
    """GPUs the plan attaches to (`change` > 0) or detaches from (`change` < 0) a composable
    node, from or to the pool of `model` (docs/composition.md)."""

    node: str
    model: str
    change: int
    reason: str = ""


@dataclass
class QueueReport:
    """One queue in the plan: its quota, its fair share, what its jobs still ask for, and the
    GPUs it holds before and after the plan."""

    name: str
    deserved: float
    fair_share: int
    pending_demand: float
    allocated_before: float
    allocated_after: float
    parent: str | None = None
    limit: float | None = None
    usage_gpu_h: float | None = None  # past usage, with a department's queues', where fair share counts it
    fair_share_without_usage: int | None = None  # the fair share had past usage not counted

    @property
    def fair_share_words(self) -> str:
        """Its fair share in words, with what past usage changed."""
        return fair_share_words(self.fair_share, self.fair_share_without_usage)


def fair_share_words(fair: int, without_usage: int | None) -> str:
    """A fair share in words: '2', or '2 (4 without its past usage)' where usage changed it."""
    if without_usage is None or without_usage == fair:
        return str(fair)
    return f"{fair} ({without_usage} without its past usage)"


@dataclass
class SolverReport:
    """How the plan was solved: the solver, its status and time, the program's size and gap,
    and each stage of a staged solve."""

    backend: str
    status: str
    seconds: float
    variables: int
    constraints: int
    gap: float | None = None
    stages: list[dict] = field(default_factory=list)
    build_seconds: float = 0.0  # reading the snapshot and building the program


@dataclass
class Plan:
    jobs: list[JobDecision]
    queues: list[QueueReport]
    summary: dict
    solver: SolverReport
    warnings: list[str] = field(default_factory=list)
    telemetry: dict | None = None  # what telemetry the plan used, and how old it was
    observed: dict | None = None  # a live cluster's observation: source, api_calls, objects, bytes, seconds
    compositions: list[Composition] = field(default_factory=list)

    def __post_init__(self) -> None:
        """`summary` counts the GPUs the plan attaches and detaches (its `compositions`)."""
        self.summary["attached"] = sum(c.change for c in self.compositions if c.change > 0)
        self.summary["detached"] = -sum(c.change for c in self.compositions if c.change < 0)

    def job(self, name: str) -> JobDecision:
        return next(j for j in self.jobs if j.name == name)

    def changes_by_node(self) -> dict[str, int]:
        """Each node's net change in GPUs (what `expect.compositions` pins)."""
        out: dict[str, int] = {}
        for c in self.compositions:
            out[c.node] = out.get(c.node, 0) + c.change
        return out

    def to_dict(self, with_timing: bool = True) -> dict:
        """The Plan as JSON-ready data; `with_timing=False` drops solver seconds."""
        solver = asdict(self.solver)
        if not with_timing:
            solver.pop("seconds")
            solver.pop("build_seconds")
            for stage in solver["stages"]:
                stage.pop("seconds", None)
        out = {
            "apiVersion": API_VERSION,
            "kind": "Plan",
            "jobs": [asdict(j) for j in self.jobs],
            "queues": [asdict(q) for q in self.queues],
            "summary": dict(self.summary),
            "solver": solver,
            "warnings": list(self.warnings),
            "telemetry": self.telemetry if with_timing or self.telemetry is None
            else {k: v for k, v in self.telemetry.items() if k != "age_s"},
        }
        if self.compositions:
            out["compositions"] = [asdict(c) for c in self.compositions]
        if self.observed is not None:
            out["observed"] = dict(self.observed) if with_timing else {
                k: v for k, v in self.observed.items() if k != "seconds"}
        return out
