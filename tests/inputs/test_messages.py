"""Every gpu-policy error is one printable line of at most 300 characters."""

import pytest

from gpu_policy import parse_scenario_text
from gpu_policy.errors import MESSAGE_LIMIT, GpuPolicyError, ScenarioError, one_line


def test_control_characters_are_escaped():
    assert one_line("a\nb\r\tc\x1b[31m\u202ed\x00") == "a\\nb\\r\\tc\\x1b[31m\\u202ed\\x00"


def test_long_messages_are_cut_to_the_limit():
    text = one_line("x" * 1000)
    assert len(text) == MESSAGE_LIMIT and text.endswith("...")
    assert one_line("ok as it is") == "ok as it is"


def test_every_error_type_applies_it():
    error = GpuPolicyError("line one\nline two " + "y" * 500)
    assert "\n" not in str(error) and len(str(error)) <= MESSAGE_LIMIT
    with pytest.raises(ScenarioError, match=r"^evil\\nname: jobs\[0\] \(name: j\)\.gp\\nus: unknown field"):
        parse_scenario_text('nodes: []\nqueues: [{name: q}]\njobs: [{name: j, queue: q, gpus: 1, "gp\\nus": 1}]\n',
                            "evil\nname")
