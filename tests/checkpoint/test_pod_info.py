"""The kubelet's annotations file: its exact format, bounds, and atomic replacement."""

import logging

import pytest

from gpu_policy.checkpoint import pod_info
from gpu_policy.checkpoint.pod_info import PodInfoError, PodInfoFile, parse_annotations, unquote
from tests.checkpoint.kubelet import format_annotations, go_quote, write_volume

ODD = {
    "gpu-policy.io/checkpoint-requested": "2026-01-31T12:00:00Z",
    "kubectl.kubernetes.io/last-applied-configuration": '{"a": "b\\\\c",\n\t"d": 1}\n',
    "controls": "\x00\x01\x1b\x7f\a\b\f\r\v",
    "unicode": "caf\u00e9 \u4e2d\u6587 \U0001F600",  # printable: written as they are
    "invisible": "\u200b\u0085\ue000\U000E0001",  # not printable: \u and \U escapes
    "empty": "",
}


def test_what_the_kubelet_writes_reads_back():
    text = format_annotations(ODD)
    assert "\n" not in text.split("\n")[-1] and text.count("\n") == len(ODD) - 1
    assert '\\x00\\x01\\x1b\\x7f\\a\\b\\f\\r\\v' in text and "\\u200b\\u0085\\ue000\\U000e0001" in text
    assert parse_annotations(text) == ODD


def test_a_file_written_by_hand_in_the_kubelet_format():
    text = ('a.example/x="say \\"hi\\"\\n\\ttab"\n'
            'b="\\101\\x42\\u0043\\U0001F600 \\\\ done"\n'
            'gpu-policy.io/checkpoint-requested="2026-01-31T12:00:00Z"')
    assert parse_annotations(text) == {"a.example/x": 'say "hi"\n\ttab', "b": "ABC\U0001F600 \\ done",
                                       "gpu-policy.io/checkpoint-requested": "2026-01-31T12:00:00Z"}
    assert parse_annotations("") == {} and parse_annotations('k="v"\n') == {"k": "v"}


@pytest.mark.parametrize("text, message", [
    ("k=v", "must be in double quotes"),
    ('k="v', "must be in double quotes"),
    ('k="a"b"', "bare quote"),
    ('k="a\\q"', "bad escape"),
    ("k=\"it\\'s\"", "bad escape"),  # Go's Unquote refuses \' in a double-quoted string
    ('k="\\x4"', "bad escape"),
    ('k="\\400"', "bad escape"),
    ('k="\\ud800"', "no Unicode character"),
    ('k="\\U00110000"', "no Unicode character"),
    ('k="end\\"', "bad escape"),
    ('novalue', "must be key=\"value\""),
    ('="v"', "must be key=\"value\""),
    ('bad key="v"', "must be key=\"value\""),
    ('k="1"\nk="2"', "k appears twice"),
    ("k=\"v\"\n\nj=\"w\"", "line 2"),
])
def test_what_breaks_the_format_is_refused(text, message):
    with pytest.raises(PodInfoError, match=message):
        parse_annotations(text)


def test_bounds():
    with pytest.raises(PodInfoError, match="longer than"):
        unquote('"' + "\\x41" * (pod_info.MAX_VALUE + 1) + '"')
    with pytest.raises(PodInfoError, match="more than"):
        parse_annotations("\n".join(f'k{i}=""' for i in range(pod_info.MAX_LINES + 1)))
    with pytest.raises(PodInfoError, match="must be key"):
        parse_annotations("k" * (pod_info.MAX_KEY + 1) + '="v"')
    assert go_quote("\\") == '"\\\\"'


def test_the_file_follows_the_kubelets_swaps(tmp_path, monkeypatch):
    folder = tmp_path / "pod"
    watched = PodInfoFile(str(folder / "annotations"))
    assert watched.annotations() == {}  # no volume: no annotations, no warning
    write_volume(folder, {"a": "1"})
    assert watched.annotations() == {"a": "1"}
    opened = []
    real_open = open
    monkeypatch.setattr(pod_info, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k), raising=False)
    assert watched.annotations() == {"a": "1"} and opened == []  # unchanged: a stat, no read
    write_volume(folder, {"a": "2", "b": "x"})
    assert watched.annotations() == {"a": "2", "b": "x"} and len(opened) == 1
    write_volume(folder, {})
    assert watched.annotations() == {}


def test_a_bad_file_is_no_annotations_and_one_warning(tmp_path, caplog):
    folder = tmp_path / "pod"
    watched = PodInfoFile(str(write_volume(folder, raw=b'k="unterminated')))
    with caplog.at_level(logging.WARNING, logger="gpu_policy.checkpoint.pod_info"):
        assert watched.annotations() == {} and watched.annotations() == {}
        write_volume(folder, raw=b'k="\xff"')
        assert watched.annotations() == {}
        write_volume(folder, raw=b"k=" + b'"' + b"x" * pod_info.MAX_BYTES + b'"')
        assert watched.annotations() == {}
    whys = ["(line 1 (k): a value must be in double quotes)", "(not UTF-8 at byte 3)",
            f"(larger than {pod_info.MAX_BYTES} bytes ({pod_info.MAX_BYTES + 4}))"]
    assert [r.message for r in caplog.records] == [
        f"{folder / 'annotations'}: not the kubelet's annotations file {why}; taken as no checkpoint request"
        for why in whys]
    write_volume(folder, {"k": "v"})
    assert watched.annotations() == {"k": "v"}
