"""The embedded cluster: a scenario, simulated in memory (the default with no live cluster)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from gpu_policy.model.apply import apply_plan
from gpu_policy.model.cluster import Acted, Observation, Orders, Outcome
from gpu_policy.model.composition import describe
from gpu_policy.model import Job, Scenario
from gpu_policy.model.plan import Plan
from gpu_policy.model.safe_load import DEFAULT_LIMITS, InputLimits
from gpu_policy.model.scenario_dump import dump_scenario
from gpu_policy.model.scenario_file import load_scenario, parse_scenario_text


class ScenarioCluster:
    """A scenario file (read on the first look) or a Scenario, as a cluster. Telemetry is
    simulated from its `telemetry:` section. It is its own actuator: carrying out a plan
    changes the scenario in memory (the plan happens at once: victims stop, starts run, gated
    pods are no concern of a file), and writes it to `apply_to` when given; the file it was
    read from is never changed."""

    simulated_telemetry = True
    executes_by_default = False

    def __init__(self, scenario: Scenario | str | Path, apply_to: str | Path | None = None,
                 limits: InputLimits = DEFAULT_LIMITS):
        if isinstance(scenario, Scenario):
            self.url, self._scenario = scenario.source or "<scenario>", scenario
        else:
            self.url, self._scenario = str(scenario), None
        self.apply_to = apply_to
        self.limits = limits
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, apply_to: str | Path | None = None,
                 limits: InputLimits = DEFAULT_LIMITS) -> ScenarioCluster:
        return cls(url.removeprefix("file://"), apply_to, limits)

    @classmethod
    def from_text(cls, text: str, source: str, limits: InputLimits = DEFAULT_LIMITS) -> ScenarioCluster:
        """A scenario given as YAML or JSON text (a pipeline parameter), checked like a file."""
        return cls(parse_scenario_text(text, source, limits))

    @property
    def scenario(self) -> Scenario:
        if self._scenario is None:
            self._scenario = load_scenario(self.url, self.limits)
        return self._scenario

    def observe(self) -> Observation:
        return Observation(self.scenario)

    def step_job(self, job: Job) -> Job:
        return job

    def attach_waiter(self, plan: Plan, observation: Observation, step: Job, outcomes: list[Outcome]) -> None:
        """Nothing to wait for: the embedded cluster attaches GPUs at once."""
        return None

    def planning(self) -> threading.Lock:
        return self._lock

    @property
    def actuator(self) -> ScenarioCluster:
        return self

    def carry_out(self, plan: Plan, observation: Observation, orders: Orders) -> Acted:
        execute, step = orders.execute, orders.step
        result = "done" if execute else "dry run"
        outcomes = [Outcome(c.node, "attach" if c.change > 0 else "detach", result,
                            f"{describe(c)}" + (f": {c.reason}" if c.reason else ""), [c.node])
                    for c in plan.compositions]
        outcomes += [Outcome(d.name, d.action, result, d.reason, [r.node for r in d.replicas])
                     for d in plan.jobs if d.stops]
        if step is not None and plan.job(step.name).action == "start":
            outcomes.append(Outcome(step.name, "reserve", result, "it runs where the plan put it",
                                    [r.node for r in plan.job(step.name).replicas]))
        if execute:
            scenario = observation.scenario
            if step is not None and all(j.name != step.name for j in scenario.jobs):
                scenario = dataclasses.replace(scenario, jobs=[*scenario.jobs, step])  # it runs from now on
            self._scenario = apply_plan(scenario, plan)
            if self.apply_to:
                dump_scenario(self._scenario, self.apply_to)
        return Acted(outcomes)
