"""The same input gives the same plan, solver seconds aside."""

import json

from tests.conftest import scenario_files
from gpu_policy import load_scenario, plan


def test_same_input_same_plan():
    for path in scenario_files():
        first = json.dumps(plan(load_scenario(path)).to_dict(with_timing=False), sort_keys=True)
        second = json.dumps(plan(load_scenario(path)).to_dict(with_timing=False), sort_keys=True)
        assert first == second, path.name
