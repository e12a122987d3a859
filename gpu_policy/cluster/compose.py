"""Observe -> decide: the one composition the CLI, the KFP components and the Airflow
operators all call.

`observe` takes one look at a cluster (its snapshot, then GPU telemetry judged against
it), `plan_observation` plans it, `step_observation` decides one pipeline step on it,
and `wait_for_step` repeats look and decision, re-observing each round, until the step
may start or its time is up.
"""

from __future__ import annotations

import time
from typing import Callable

from gpu_policy.cluster.embedded import ScenarioCluster
from gpu_policy.cluster.source import ClusterSource, Observation
from gpu_policy.model import Job, Scenario
from gpu_policy.plan import Plan
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.step import StepDecision, decide_step
from gpu_policy.telemetry import ClusterSignals, DcgmSource, SimulatedDcgmSource, TelemetrySettings, dcgm_source
from gpu_policy.telemetry import observe as judge_telemetry

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


def wait_for_step(cluster: ClusterSource, job: Job, config: PlannerConfig | None = None,
                  telemetry: DcgmSource | str | ClusterSignals | None = None,
                  settings: TelemetrySettings | None = None,
                  max_wait_s: float = 0.0, poll_interval_s: float = 30.0,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> StepDecision:
    """Observe and decide until the step may start or `max_wait_s` has passed (bounded).
    Each round looks at the cluster again, so GPUs freed meanwhile are seen."""
    job = cluster.step_job(job)
    began, attempts = clock(), 0
    while True:
        attempts += 1
        decision = step_observation(observe(cluster, telemetry, settings), job, config)
        decision.attempts = attempts
        if decision.can_start or clock() - began + poll_interval_s > max_wait_s:
            return decision
        sleep(poll_interval_s)
