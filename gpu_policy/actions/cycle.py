"""Observe -> decide -> act: the one composition the CLI, the KFP components and the
Airflow operators all call.

`observe` takes one look at a cluster (its snapshot, then GPU telemetry judged against
it), `plan_observation` plans it, `step_observation` decides one pipeline step on it.
`apply_plan_once` observes, plans and carries the plan out; `wait_for_step` does the same
for a pipeline step, observing again each round until the step may start or its time is
up; `reconcile` applies a plan every so often. When they act, they hold the cluster's
planning lock (on Kubernetes, the Lease) from the look to the last write.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import nullcontext
from typing import Callable

from gpu_policy.cluster.embedded import ScenarioCluster
from gpu_policy.model.cluster import ActingCluster, AttachWaiter, ClusterSource, Observation, Orders, Outcome
from gpu_policy.errors import GpuPolicyError, UsageError
from gpu_policy.model import Job, Scenario
from gpu_policy.model.plan import Plan
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.actions.step import StepDecision, decide_step
from gpu_policy.telemetry import ClusterSignals, DcgmSource, SimulatedDcgmSource, TelemetrySettings, dcgm_source
from gpu_policy.telemetry import observe as judge_telemetry

log = logging.getLogger(__name__)
#: the longest a step may wait (30 days): nan, inf or 1e308 would otherwise wait forever
MAX_WAIT_S = 30 * 86400

def observe(cluster: ClusterSource, telemetry: DcgmSource | str | ClusterSignals | None = None,
            settings: TelemetrySettings | None = None) -> Observation:
    """Snapshot `cluster`, then read GPU telemetry (a source, a Prometheus URL, signals
    judged already, or None: simulated on the embedded cluster, none on a live one) and
    judge it against the snapshot. Monitoring that is down is a warning, never an error."""
    obs = cluster.observe()
    if isinstance(telemetry, ClusterSignals):
        obs.signals = telemetry
        return obs
    source = dcgm_source(telemetry, obs.scenario, settings) if isinstance(telemetry, str) else telemetry
    if source is None and cluster.simulated_telemetry:
        source = SimulatedDcgmSource(obs.scenario)
    if source is not None:
        obs.signals, warning = judge_telemetry(obs.scenario, source, settings)
        if warning:
            obs.warnings.append(warning)
            obs.telemetry_unavailable = warning
    return obs


def _annotate(result: Plan, obs: Observation) -> Plan:
    result.warnings.extend(obs.warnings)
    result.observed = obs.observed
    return result


def plan_observation(obs: Observation, config: PlannerConfig | None = None) -> Plan:
    """The plan of one look, carrying its warnings and what the look cost."""
    return _annotate(plan(obs.scenario, config, obs.signals), obs)


def plan_cluster(cluster: ClusterSource, config: PlannerConfig | None = None,
                 telemetry: DcgmSource | str | ClusterSignals | None = None,
                 settings: TelemetrySettings | None = None) -> Plan:
    """Observe, then decide."""
    return plan_observation(observe(cluster, telemetry, settings), config)


def plan_with_telemetry(scenario: Scenario, source: DcgmSource | None = None, config: PlannerConfig | None = None,
                        settings: TelemetrySettings | None = None) -> Plan:
    """Plan a scenario with its telemetry (simulated when `source` is None); without
    telemetry the plan uses allocations alone and says so."""
    return plan_cluster(ScenarioCluster(scenario), config, source, settings)


def step_observation(obs: Observation, job: Job, config: PlannerConfig | None = None) -> StepDecision:
    """What the step's job gets on this look."""
    decision = decide_step(obs.scenario, job, obs.signals, config)
    _annotate(decision.plan, obs)
    return decision


def _acting(cluster: ActingCluster, execute: bool):
    """The planning lock when the plan will be carried out; a dry run writes nothing and needs none."""
    return cluster.planning() if execute else nullcontext()


def apply_plan_once(cluster: ActingCluster, config: PlannerConfig | None = None,
                    telemetry: DcgmSource | str | ClusterSignals | None = None,
                    settings: TelemetrySettings | None = None,
                    execute: bool | None = None, release: bool = False) -> tuple[Plan, list[Outcome]]:
    """Observe, decide and carry the plan out (`execute`; default: on a live cluster yes,
    on the embedded one no, which describes what would be done). With `release`, the gated
    pods the plan starts are released too, and the pods told why, as the controller does
    (docs/kubernetes.md, "Acting"): never beside a running controller."""
    execute = cluster.executes_by_default if execute is None else execute
    with _acting(cluster, execute):
        obs = observe(cluster, telemetry, settings)
        result = plan_observation(obs, config)
        return result, cluster.actuator.carry_out(result, obs, Orders(execute, admit=release)).outcomes


def wait_for_step(cluster: ActingCluster, job: Job, config: PlannerConfig | None = None,
                  telemetry: DcgmSource | str | ClusterSignals | None = None,
                  settings: TelemetrySettings | None = None,
                  max_wait_s: float = 0.0, poll_interval_s: float = 30.0, execute: bool | None = None,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep,
                  progress: Callable[[str], None] | None = None) -> StepDecision:
    """Observe, decide and act until the step may start or `max_wait_s` has passed
    (bounded). Each round looks at the cluster again, so GPUs freed meanwhile (a job that
    finished, a victim evicted) are seen. Each round carries out the plan (`execute`, as for
    `apply_plan_once`): evictions, GPUs attached and detached, and, once the step may start,
    its reservation. A step the plan starts on the GPUs of victims asked to checkpoint first
    waits for them like any other step. A step that starts on GPUs being attached then waits
    for them, within the same `max_wait_s`, saying what it waits for (`progress`, default: the log)."""
    for name, value, least in (("max_wait_s", max_wait_s, 0.0), ("poll_interval_s", poll_interval_s, 1e-3)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not least <= value <= MAX_WAIT_S:
            raise UsageError(f"{name}: must be a number of seconds from {least:g} to {MAX_WAIT_S:,}, got {value!r}")
    execute = cluster.executes_by_default if execute is None else execute
    job = cluster.step_job(job)
    began, attempts = clock(), 0
    while True:
        attempts += 1
        with _acting(cluster, execute):
            obs = observe(cluster, telemetry, settings)
            decision = step_observation(obs, job, config)
            acted = cluster.actuator.carry_out(decision.plan, obs, Orders(execute, step=job))
            decision.outcomes = acted.outcomes
        decision.attempts = attempts
        for held in acted.waiting:  # it starts on GPUs whose victims are still saving: not yet
            decision.hold(f"{held.why.code}: {held.why.text}")
        waiter = cluster.attach_waiter(decision.plan, obs, job, decision.outcomes) if decision.can_start and execute \
            else None
        if waiter is not None:
            return _await_attach(decision, waiter, began + max_wait_s, poll_interval_s, clock, sleep,
                                 progress or (lambda text: log.info("%s", text)))
        if decision.can_start or clock() - began + poll_interval_s > max_wait_s:
            return decision
        sleep(poll_interval_s)


def _await_attach(decision: StepDecision, waiter: AttachWaiter, until: float, poll_interval_s: float,
                  clock: Callable[[], float], sleep: Callable[[float], None],
                  progress: Callable[[str], None]) -> StepDecision:
    """Poll the GPUs the step's start waits for until they are usable, fail, or `until` comes."""
    said = None
    while True:
        state = waiter.poll()
        if state.done:
            return decision
        if state.text != said:
            progress(state.text)
            said = state.text
        if state.failed or clock() + poll_interval_s > until:
            decision.hold(state.text)
            return decision
        sleep(poll_interval_s)


def reconcile(cluster: ActingCluster, every_s: float, rounds: int | None = None,
              config: PlannerConfig | None = None, telemetry: DcgmSource | str | None = None,
              settings: TelemetrySettings | None = None, execute: bool | None = None,
              report: Callable[[Plan | None, list[Outcome], str | None], None] | None = None,
              stop: threading.Event | None = None, release: bool = False) -> int:
    """Apply a plan every `every_s` seconds (`rounds` times, or until `stop` is set):
    fair share enforced for teams whose pods do not come from pipelines (`release`: as in
    `apply_plan_once`). A round that fails (an unreachable API server, bad input) is
    reported and the next round tries again. Returns the number of rounds that failed."""
    stop = stop or threading.Event()
    failed, done = 0, 0
    while not stop.is_set() and (rounds is None or done < rounds):
        began = time.monotonic()
        try:
            result, outcomes = apply_plan_once(cluster, config, telemetry, settings, execute, release)
            error = None
        except GpuPolicyError as e:
            result, outcomes, error = None, [], str(e)
            failed += 1
            log.warning("reconcile: %s", error)
        done += 1
        if report:
            report(result, outcomes, error)
        if rounds is None or done < rounds:
            stop.wait(max(0.0, every_s - (time.monotonic() - began)))
    return failed
