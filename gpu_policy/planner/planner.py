"""`plan(scenario) -> Plan`: observe nothing, decide everything, no I/O, within a budget."""

from __future__ import annotations

from collections import defaultdict

from gpu_policy.model import Job, Scenario, placement
from gpu_policy.model.layout import Layout, running_layout
from gpu_policy.model.plan import Plan
from gpu_policy.model.signals import ClusterSignals
from gpu_policy.planner.config import FIRST_PASS_SHARE, PlannerConfig
from gpu_policy.planner.core.context import PlanContext
from gpu_policy.planner.core.fair_share import fair_shares, queue_demands
from gpu_policy.planner.core.packing import scenario_mix
from gpu_policy.planner.core.program import build_decisions
from gpu_policy.planner.core.queues import QueueTree, Shares
from gpu_policy.planner.core.realize import realize
from gpu_policy.planner.core.rule import PlanInputs
from gpu_policy.planner.core.scope import Standing, scope
from gpu_policy.planner.core.shapes import node_kinds, scenario_constraints
from gpu_policy.planner.core.solve import FIRST_PLAN_KEPT, solve_stages
from gpu_policy.planner.core.solvers import CUT_OFF, NOTHING, OPTIMAL, highs_available
from gpu_policy.planner.core.telemetry import gpu_limits, with_unhealthy
from gpu_policy.planner.ruleset import RuleSet
from gpu_policy.planner.rules.claims import start_order as order_of_starts
from gpu_policy.planner.rules.fits import could_ever_fit
from gpu_policy.planner.writeup import write_plan


def plan(scenario: Scenario, config: PlannerConfig | None = None, signals: ClusterSignals | None = None) -> Plan:
    """Decide keep / start / preempt / move / wait for every job of a validated scenario,
    within `config.time_limit_s` seconds for the whole plan.

    With `signals` (DCGM telemetry, see `plan_with_telemetry`): unhealthy GPUs get no new
    work, idle jobs of queues above their share are the first victims, and fractional jobs
    avoid busy GPUs and GPUs without the memory they need.

    With a `composable:` section, GPUs are attached from the pool for waiting work and
    idle attached GPUs go back (the composition rule); fair shares then
    count the GPUs the plan's compositions leave, so a plan that changes them is made again
    (`_decide`).
    """
    cfg = config or PlannerConfig()
    cfg.validate()
    began = cfg.clock()
    deadline = began + cfg.time_limit_s
    s = with_unhealthy(scenario, signals) if signals else scenario
    layout = running_layout(s)
    composes = bool(s.composable and s.composable.nodes)
    attached = s.gpus_schedulable  # healthy GPUs attached now (a pass over every node: once)
    first = result = _decide(s, cfg, signals, layout, attached,
                             began + FIRST_PASS_SHARE * cfg.time_limit_s if composes else deadline)
    capacity, passes = attached, 1
    while _capacity_after(attached, result) != capacity:
        if passes == _PASSES:
            result = _first_kept(attached, first, "no plan agrees with the shares it assumed")
            break
        if passes == 1:  # the plan made again has its own share, even when the first overran its own
            deadline = max(deadline, cfg.clock() + (1 - FIRST_PASS_SHARE) * cfg.time_limit_s)
        elif cfg.clock() >= deadline - _reserve(cfg, s):
            result = _first_kept(attached, first, "time limit")
            break
        capacity, passes = _capacity_after(attached, result), passes + 1
        result = _decide(s, cfg, signals, layout, capacity, deadline)
        if result.solver.status not in (OPTIMAL, NOTHING):  # cut off, or a stage found nothing: the first is better
            cause = "time limit" if result.solver.status == CUT_OFF else "a stage found no solution"
            result = _first_kept(attached, first, cause)
            break
    if result.solver.status == CUT_OFF:
        result.warnings.append(f"the plan's time limit of {cfg.time_limit_s:g} s ran out before the plan was "
                               "optimal: jobs it could not decide wait, and start in a later plan")
    if cfg.solver == "highs" and not highs_available():
        result.warnings.append("highspy is not installed: planned with CBC (pip install highspy)")
    return result


def _first_kept(attached: int, first: Plan, cause: str) -> Plan:
    """The first plan (fair shares of the `attached` GPUs, those attached now), when no plan
    made again with the GPUs its compositions leave could replace it: its status says why, a
    warning what it costs."""
    first.solver.status = FIRST_PLAN_KEPT.format(cause=cause)
    first.warnings.append(f"fair shares count the {attached} GPUs attached now, not the "
                          f"{_capacity_after(attached, first)} the plan's "
                          f"compositions leave ({cause}): the next plan, counting those, may rebalance the queues")
    return first


#: Most plans made to find one whose fair shares count the GPUs its own compositions leave.
_PASSES = 3


def _capacity_after(attached: int, result: Plan) -> int:
    """Healthy GPUs once the plan's compositions are carried out, from the `attached` ones
    before (attached GPUs are healthy; only idle, healthy ones are detached)."""
    return attached + result.summary["attached"] - result.summary["detached"]


def _decide(s: Scenario, cfg: PlannerConfig, signals: ClusterSignals | None, layout: Layout, capacity: int,
            deadline: float) -> Plan:
    """One plan, with fair shares of `capacity` GPUs. `plan` makes it the cluster's healthy
    GPUs once the plan's compositions are carried out (GPUs attached now, plus those it
    attaches, less those it detaches; never the pool's): with shares of the GPUs before a
    composition, the next plan, seeing the new capacity, would rebalance. When a plan's
    compositions change the capacity it assumed, it plans again with theirs, at most
    `_PASSES` times; failing agreement, the first plan (shares of the GPUs attached now)."""
    began = cfg.clock()
    limits = gpu_limits(signals)
    rules = RuleSet.for_plan(PlanInputs(s, layout, signals, cfg))
    constraints = scenario_constraints(s)  # one pass over the jobs, shared by the kinds and the scope
    kinds = rules.grow_kinds(node_kinds(s, constraints), constraints)
    refused = placement.refusals(s)
    st, waiting, order = _standing(s, capacity, kinds, refused)
    solver_deadline = deadline - _reserve(cfg, s)
    if cfg.clock() >= solver_deadline:  # no time to decide anything: keep everything, start nothing
        order = []
    sc = scope(s, layout, st, order, cfg, limits, constraints, rules, rules.detail())
    rules.widen(sc)
    grown = rules.extend(layout)  # composable nodes with a free slot for each GPU they could take
    m = build_decisions(s, sc, cfg.max_moves, kinds)
    mix = cfg.workload_mix or scenario_mix(s)
    if m.decisions.starts:
        rules.build(PlanContext(m, s, grown, sc, st, cfg, limits, order, mix))
    built = cfg.clock() - began
    report = solve_stages(m, cfg, solver_deadline)
    if not order and waiting:
        report.status = CUT_OFF
    report.build_seconds = built
    outcome = realize(m, s, grown, sc, order, mix, rules.node_order)
    rules.decide(m, outcome.layout, report.status in (OPTIMAL, NOTHING))
    return write_plan(s, st, m, outcome, layout, limits, kinds, report, signals, rules, refused)


def _standing(s: Scenario, capacity: int, kinds, refused: dict[str, str]) -> tuple[Standing, list[Job], list[Job]]:
    """The queues' shares of `capacity` GPUs and holdings, the waiting jobs that could ever
    fit (and that their queue admits: not in `refused`), and the order the planner tries to
    start them in."""
    tree = QueueTree.of(s)
    demands = queue_demands(s, refused)
    could_fit = could_ever_fit(kinds, s.nodes)
    running: list[Job] = []
    waiting: list[Job] = []
    for job in s.jobs:
        (running if job.running else waiting).append(job)
    plain = fair_shares(s, capacity, demands, with_usage=False) if s.policy.counts_usage else None
    st = Standing(tree, Shares.of(s, fair_shares(s, capacity, demands), demands, plain), *held(tree, running))
    waiting = [j for j in waiting if j.name not in refused and could_fit(j)]
    return st, waiting, order_of_starts(tree, st.shares, st.held, waiting)


def start_order(s: Scenario) -> list[Job]:
    """The waiting jobs that could ever fit, in the order the planner tries to start them
    (fair shares of the GPUs attached now): what `gpu-policy status` and `explain` show."""
    constraints = scenario_constraints(s)
    rules = RuleSet.for_plan(PlanInputs(s, running_layout(s), None, PlannerConfig()))
    kinds = rules.grow_kinds(node_kinds(s, constraints), constraints)
    return _standing(s, s.gpus_schedulable, kinds, placement.refusals(s))[2]


def _reserve(cfg: PlannerConfig, s: Scenario) -> float:
    """Seconds kept from the solver for turning its answer into a Plan: about 25 us per
    job (measured at 21,000 jobs), never more than half the budget."""
    return min(0.5 * cfg.time_limit_s, 0.02 + 2.5e-5 * len(s.jobs))


def held(tree: QueueTree, running: list[Job]) -> tuple[dict[str, float], dict[str, float]]:
    """GPUs each queue and department holds when the `running` jobs run, all of them and the
    non-preemptible ones (summed in the order given: the scenario's)."""
    leaf: dict[str, float] = defaultdict(float)
    pinned: dict[str, float] = defaultdict(float)
    for job in running:
        gpus = job.total_gpus
        leaf[job.queue] += gpus
        if not job.is_preemptible:
            pinned[job.queue] += gpus
    return tree.rolled_up(leaf), tree.rolled_up(pinned)
