"""The embedded cluster: a scenario, simulated in memory (the default with no live cluster)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpu_policy.cluster.source import Observation
from gpu_policy.errors import ScenarioError
from gpu_policy.model import Job, Scenario
from gpu_policy.scenario import load_scenario, parse_scenario


class ScenarioCluster:
    """A scenario file (read on the first look) or a Scenario, as a cluster. Telemetry is
    simulated from its `telemetry:` section."""

    simulated_telemetry = True

    def __init__(self, scenario: Scenario | str | Path):
        if isinstance(scenario, Scenario):
            self.url, self._scenario = scenario.source or "<scenario>", scenario
        else:
            self.url, self._scenario = str(scenario), None

    @classmethod
    def from_url(cls, url: str) -> ScenarioCluster:
        return cls(url.removeprefix("file://"))

    @classmethod
    def from_text(cls, text: str, source: str) -> ScenarioCluster:
        """A scenario given as YAML or JSON text (a pipeline parameter), checked like a file."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise ScenarioError(source, "", f"not valid YAML or JSON{f' at line {mark.line + 1}' if mark else ''}") from None
        return cls(parse_scenario(data, source))

    @property
    def scenario(self) -> Scenario:
        if self._scenario is None:
            self._scenario = load_scenario(self.url)
        return self._scenario

    def observe(self) -> Observation:
        return Observation(self.scenario)

    def step_job(self, job: Job) -> Job:
        return job
