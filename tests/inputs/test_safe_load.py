"""gpu_policy.model.safe_load: plain data as PyYAML reads it, and one line for everything else."""

import json
import math

import pytest
import yaml

pytest.importorskip("hypothesis", reason="hypothesis is in the [dev] extra: pip install -e '.[dev]'")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpu_policy.errors import InputError  # noqa: E402
from gpu_policy.model.safe_load import _EXPONENT_FLOAT, InputLimits, parse_text, read_text  # noqa: E402

# Text that YAML 1.1 reads as text but gpu-policy as a number (1e30, as YAML 1.2 and JSON do)
# differs from PyYAML on purpose: test_exponent_numbers_are_numbers covers it
TEXT = st.text(max_size=20).filter(lambda t: not _EXPONENT_FLOAT.match(t.strip()))
PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10 ** 15, 10 ** 15), TEXT,
              st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda f: len(repr(f)) <= 64)),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(TEXT, inner, max_size=5)),
    max_leaves=25)


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(PLAIN, st.booleans())
def test_plain_data_reads_as_pyyaml_and_json_read_it(data, flow):
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    assert parse_text(text, "x.yaml") == yaml.safe_load(text)
    as_json = json.dumps([data])  # JSON documents are lists or mappings
    assert parse_text(as_json, "x.json") == json.loads(as_json)


def test_yaml_octal_and_sexagesimal_stay_as_pyyaml_reads_them():
    assert parse_text("a: 010\nb: 1:30\nc: 0\nd: 1_000\n", "x") == {"a": 8, "b": 90, "c": 0, "d": 1000}


def test_exponent_numbers_are_numbers():
    """YAML 1.1 reads 1e30 as text; gpu-policy reads it as JSON does, so a YAML file and a JSON
    file with the same value get the same range message (issue 28). Quoted, it stays text."""
    text = 'a: 1e30\nb: 1.5e3\nc: -2E-3\nd: "1e3"\ne: 1e\nf: 1.0e+3\n'
    assert parse_text(text, "x.yaml") == {"a": 1e30, "b": 1500.0, "c": -0.002, "d": "1e3", "e": "1e", "f": 1000.0}
    with pytest.raises(InputError, match="x.yaml: line 1: a: numbers must be finite, got 1e400"):
        parse_text("a: 1e400\n", "x.yaml")


def test_anchors_and_merge_keys():
    text = "d: &d {gpus: 1, queue: q}\njobs:\n - <<: *d\n   name: a\n - <<: [*d]\n   name: b\n   gpus: 2\n"
    assert parse_text(text, "x")["jobs"] == [{"gpus": 1, "queue": "q", "name": "a"},
                                             {"gpus": 2, "queue": "q", "name": "b"}]


REFUSED = {
    "duplicate key": ("a: 1\na: 2\n", r"x: line 2: duplicate key \"a\""),
    "duplicate JSON key": ('{"a": 1, "a": 2}', r"x: duplicate key \"a\""),
    "date": ("a: 2024-01-01\n", r"line 1: dates and times are not accepted"),
    "binary": ("a: !!binary aGVsbG8=\n", r"line 1: binary data is not accepted"),
    "python object": ("a: !!python/object:os.system ls\n", r"the tag !!python/object:os.system is not accepted"),
    "custom tag on a list": ("a: !x [1]\n", r"the tag !x is not accepted"),
    "NaN": ("a: .nan\n", r"line 1: a: numbers must be finite, got .nan"),
    "NaN deep in lists": ("a: [{b: [1, .inf]}]\n", r"line 1: a\[0\]\.b\[1\]: numbers must be finite, got .inf"),
    "infinite float": ("a: 1.0e+400\n", r"line 1: a: numbers must be finite"),
    "JSON NaN": ('{"a": NaN}', r"x: a: numbers must be finite, got NaN"),
    "JSON Infinity": ('{"a": 1, "b": [{"c": 2}, {"c": -Infinity}]}', r"x: b\[1\]\.c: numbers must be finite, got -Infinity"),
    "JSON 1e400": ('{"a": 1e400}', r"x: a: numbers must be finite, got 1e400"),
    "long number": ("a: " + "1" * 65 + "\n", r"a number spelt in 65 characters; at most 64"),
    "deep YAML": ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 100)), r"line 65: nests deeper than 64"),
    "deep JSON": ("[" * 65 + "]" * 65, r"line 1: nests deeper than 64 levels"),
    "self alias": ("a: &a [1, *a]\n", r"alias \*a names no complete anchor before it"),
    "two documents": ("a: 1\n---\nb: 2\n", r"line 2: must hold one YAML document"),
    "list as key": ("? [a, b]\n: 1\n", r"a mapping key must be plain text or a number"),
    "control character": ("a: \x07\n", r"line 1: character 0x07 is not allowed in YAML"),
    "bad merge": ("a: 1\nb: {<<: 3}\n", r"a merge key \(<<\) takes a mapping or a list of mappings"),
    "not YAML": ("a: [\n", r"not valid YAML or JSON at line 2"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_in_one_line(case):
    text, pattern = REFUSED[case]
    with pytest.raises(InputError, match=pattern) as info:
        parse_text(text, "x")
    assert "\n" not in str(info.value)


def test_size_limit_and_encoding(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * 2000)
    with pytest.raises(InputError, match=r"big.yaml: is larger than [0-9.]+ MB, the input limit"):
        read_text(big, InputLimits(max_bytes=1049))
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"a: 1\nb: \xe9\n")
    with pytest.raises(InputError, match=r"bad.yaml: line 2: is not UTF-8 text: byte 0xe9 at offset 8"):
        read_text(bad)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert parse_text(read_text(bom), "bom") == {"a": 1}


def test_limits_are_checked():
    with pytest.raises(ValueError, match=r"InputLimits.max_depth: must be a whole number >= 1, got 0"):
        InputLimits(max_depth=0)
    assert math.isclose(InputLimits().max_bytes, 20 * 2 ** 20)


def test_a_raised_size_limit_does_not_allocate_it_up_front(tmp_path):
    """A 4 GiB limit on a small file reads the file, not 4 GiB (a `read(limit)` would try to
    allocate it all, and fail with MemoryError under a memory cap)."""
    import resource

    from gpu_policy.model.safe_load import InputLimits, read_text

    path = tmp_path / "s.yaml"
    path.write_text("jobs: []\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, hard))  # below the limit asked for
    try:
        assert read_text(path, InputLimits(max_bytes=4 << 30)) == "jobs: []\n"
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
