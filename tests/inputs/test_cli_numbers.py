"""Every numeric option of every subcommand goes through one bounded parser (issue 28):
overflow, NaN, infinity, negatives and values beyond the scenario limits are one line, exit 2."""

import argparse
import math
import os

import pytest
from hypothesis import given, settings, strategies as st

from gpu_policy.cli import build_parser, main
from gpu_policy.errors import UsageError

#: Options that take a number in a syntax of their own (a range, a list, or a word as well),
#: checked by their own parsers after argparse
TEXT_SYNTAX = {("simulate teams", "--days"), ("simulate teams", "--checkpoint-every"),
               ("simulate openb", "--seeds"), ("simulate topology", "--seeds")}
#: The argparse types that are not numbers
OTHER_TYPES = {"output_file", "prometheus_url", "topology_name"}  # types of text, not numbers


PARSER = build_parser()  # built once: argparse parsers can parse again and again


def subcommands(parser=PARSER, prefix=""):
    """(name, parser) of every subcommand that runs, nested ones (simulate openb) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found = list(subcommands(sub, f"{prefix}{name} "))
                yield from found or [(f"{prefix}{name}", sub)]


def numeric_options():
    """(subcommand, option, its argparse action) for every option parsed by `_options.number`."""
    return [(name, action.option_strings[-1], action) for name, sub in subcommands() for action in sub._actions
            if hasattr(action.type, "bounds")]


def minimal_argv(name, parser, skip):
    """The subcommand with every required argument but `skip` given a valid value."""
    argv = name.split()
    for action in parser._actions:
        if not action.required or action.option_strings and action.option_strings[-1] == skip:
            continue
        bounds = getattr(action.type, "bounds", None)
        value = "x" if bounds is None else str(bounds[0] + 1 if bounds[3] else bounds[0])
        argv += ([action.option_strings[-1]] if action.option_strings else []) + [value]
    return argv


NUMERIC = numeric_options()
SUBCOMMANDS = dict(subcommands())


def test_every_numeric_option_is_bounded():
    """No option parses a number with plain int/float (unbounded: 1e30 overflows later)."""
    plain = [(name, action.option_strings, action.type) for name, sub in subcommands() for action in sub._actions
             if action.type is not None and not hasattr(action.type, "bounds")
             and getattr(action.type, "__name__", "") not in OTHER_TYPES]
    assert plain == []
    untyped = [(name, action.option_strings[-1]) for name, sub in subcommands() for action in sub._actions
               if action.option_strings and action.type is None and action.nargs is None and action.choices is None
               and isinstance(action.default, (int, float, str)) and not isinstance(action.default, bool)
               and _looks_numeric(action.default)]
    assert set(untyped) <= TEXT_SYNTAX, set(untyped) - TEXT_SYNTAX
    assert {name for name, _, _ in NUMERIC} >= {"step", "reconcile", "plan", "apply", "train-example",
                                                 "simulate openb", "simulate teams", "dcgm-exporter-sim"}


def _looks_numeric(default) -> bool:
    try:
        float(str(default).split("-")[0] or "x")
        return True
    except ValueError:
        return False


NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10 ** 40), max_value=10 ** 40).map(str),
    st.sampled_from(["1e30", "1e20", "-0", "nan", "inf", "-inf", "1e400", "9" * 5000, "", "two", "0x10", "1_000"]),
)


@pytest.mark.parametrize("name, option, action", NUMERIC, ids=[f"{n} {o}" for n, o, _ in NUMERIC])
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(text=NUMBER_TEXT)
def test_numeric_options_accept_only_bounded_numbers(name, option, action, text):
    """Through the whole parser: a value within the option's bounds parses to itself; any other
    is a one-line UsageError naming the option (exit status 2)."""
    low, high, whole, above = action.type.bounds
    argv = minimal_argv(name, SUBCOMMANDS[name], option) + [f"{option}={text}"]
    try:
        expected = int(text) if whole else float(text)
        valid = math.isfinite(expected) and (expected > low if above else expected >= low) and expected <= high
    except ValueError:
        valid = False
    if not valid:
        with pytest.raises(UsageError) as refused:
            PARSER.parse_args(argv)
        message = str(refused.value)
        assert message.startswith(f"{option}: ") and "\n" not in message and len(message) < 300, message
        return
    try:
        args = PARSER.parse_args(argv)
    except UsageError as e:  # a valid number that a rule beyond the bounds refuses: a fraction above 1 GPU,
        # a Lease longer than another replica honours
        assert ((name, option) == ("step", "--gpus") and "fraction" in str(e)
                or (name, option) == ("controller", "--lease-duration") and "max_foreign_lease_s" in str(e)), e
        return
    value = getattr(args, action.dest)
    assert value == expected and low <= value <= high


@pytest.mark.parametrize("argv, option", [
    (["step", "--cluster", "s.yaml", "--job", "j", "--queue", "q", "--gpus", "1e30"], "--gpus"),
    (["step", "--cluster", "s.yaml", "--job", "j", "--queue", "q", "--gpus", "2000"], "--gpus"),
    (["step", "--cluster", "s.yaml", "--job", "j", "--queue", "q", "--gpus", "1", "--replicas", "100000000"],
     "--replicas"),
    (["step", "--cluster", "s.yaml", "--job", "j", "--queue", "q", "--gpus", "1", "--max-wait", "-1"], "--max-wait"),
    (["reconcile", "--cluster", "s.yaml", "--every", "1e20"], "--every"),
    (["simulate", "teams", "--trace-dir", "t", "--nodes", "1e30"], "--nodes"),
])
def test_the_reported_overflows_are_one_line(argv, option, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"gpu-policy: {option}: ") and "Traceback" not in err, err


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("where", ["the file", "under the file", "/proc"])
def test_checkpoint_dir_that_cannot_hold_checkpoints_is_one_line(where, a_file, capsys):
    url = {"the file": str(a_file), "under the file": str(a_file / "run"), "/proc": "/proc/gpu-policy-run"}[where]
    assert main(["train-example", "--checkpoint-dir", url, "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"gpu-policy: --checkpoint-dir: {url}: "), err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder, so an unwritable one cannot be made")
def test_checkpoint_dir_without_permission_is_one_line(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["train-example", "--checkpoint-dir", str(locked / "run"), "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Permission denied" in err, err
