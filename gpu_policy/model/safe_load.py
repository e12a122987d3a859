"""Read the files and texts gpu-policy is given without trusting them (docs/security.md).

Scenarios, traces, queue ConfigMaps and telemetry answers all come through
here. Whatever the input, the result is plain data (dicts with string keys,
lists, str, int, float, bool, None) or an `InputError` of one line naming the
source and the line, within bounded time and memory:

- at most `InputLimits.max_bytes` are read (``/dev/zero`` included);
- text must be UTF-8; the error names the first bad byte and its line;
- nesting deeper than `max_depth` is refused before any recursion could overflow;
- YAML aliases may add at most `alias_budget` nodes in all (a billion-laughs file
  is refused at once), and an alias may not point into its own anchor;
- duplicate keys, dates, binary and every other tag beyond plain data are refused;
- numbers are finite (no NaN or infinity) and spelt in at most `max_number_chars`.

`parse_text(text, source)` takes text and a source name, so callers that read
text from elsewhere (a ConfigMap, an HTTP answer) get the same checks as a file.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from gpu_policy.errors import InputError

MIB = 1 << 20
_TAG = "tag:yaml.org,2002:"
#: Numbers with an exponent that YAML 1.1 (PyYAML) reads as text: no dot (1e30) or no sign (1.5e3)
_EXPONENT_FLOAT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+\Z")
_SCALARS = {f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null", "merge")}
_MERGE = object()  # the value of a `<<` merge key


@dataclass(frozen=True)
class InputLimits:
    """How much of an input gpu-policy reads; every field bounds time or memory."""

    max_bytes: int = 20 * MIB
    """Largest input read (20 MB: a 100,000-job scenario is about 7 MB). The CLI's
    ``--max-input-mb`` raises it."""

    max_depth: int = 64
    """Deepest nesting of lists and mappings (a scenario needs 5 levels)."""

    alias_budget: int = 10_000
    """Nodes that YAML aliases may add in all: anchors for shared defaults fit, an
    alias bomb (each level doubling the one below) does not."""

    max_number_chars: int = 64
    """Longest spelling of one number (a 401-digit number is refused before any
    conversion could overflow)."""

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "alias_budget", "max_number_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"InputLimits.{name}: must be a whole number >= 1, got {value!r}")


DEFAULT_LIMITS = InputLimits()


def read_text(path: str | Path, limits: InputLimits = DEFAULT_LIMITS, what: str = "the file") -> str:
    """The UTF-8 text of `path`, read up to the size limit (a leading BOM is dropped)."""
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = _read_at_most(handle, limits.max_bytes + 1)
    except OSError as e:
        raise InputError(source, "", f"cannot read {what}: {e.strerror or e}") from None
    if len(data) > limits.max_bytes:
        raise InputError(source, "", f"is larger than {_size(limits.max_bytes)}, the input limit "
                                     "(--max-input-mb raises it)")
    return decode(data, source)


def _read_at_most(handle, limit: int, chunk: int = 1 << 20) -> bytes:
    """Up to `limit` bytes of `handle`, read in chunks: `read(limit)` would allocate the whole
    limit up front (gigabytes under a raised `--max-input-mb`) however small the file."""
    parts, size = [], 0
    while size < limit:
        part = handle.read(min(chunk, limit - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def decode(data: bytes, source: str) -> str:
    """`data` as UTF-8 text, or an error naming the first bad byte and its line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(source, f"line {line}", f"is not UTF-8 text: byte 0x{data[e.start]:02x} "
                                                 f"at offset {e.start}") from None


def load_file(path: str | Path, limits: InputLimits = DEFAULT_LIMITS) -> Any:
    """A YAML or JSON file as plain data."""
    return parse_text(read_text(path, limits), str(path), limits)


def parse_text(text: str, source: str, limits: InputLimits = DEFAULT_LIMITS) -> Any:
    """YAML or JSON text as plain data: JSON is tried first when the text looks like it
    (JSON's own number rules then apply), YAML otherwise."""
    if len(text) > limits.max_bytes:
        raise InputError(source, "", f"is larger than {_size(limits.max_bytes)}, the input limit")
    if text.lstrip()[:1] in ("{", "["):
        try:
            return parse_json(text, source, limits)
        except json.JSONDecodeError:
            pass  # YAML flow style looks like JSON; let YAML judge it
    return parse_yaml(text, source, limits)


# ---- JSON ------------------------------------------------------------------------

_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def parse_json(text: str, source: str, limits: InputLimits = DEFAULT_LIMITS) -> Any:
    """JSON text as plain data. Raises `json.JSONDecodeError` for text that is not JSON
    (callers that accept YAML too fall back to it); every other problem is an InputError."""
    depth = 0
    for token in _JSON_TOKENS.finditer(text):  # no recursion: json's own parser recurses
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth > limits.max_depth:
                raise InputError(source, _line_at(text, token.start()),
                                 f"nests deeper than {limits.max_depth} levels")
        elif ch in "]}":
            depth -= 1

    non_finite: list[_NonFinite] = []  # json names no place: the first one is looked for once parsed

    def number(kind):
        def convert(spelling: str):
            if len(spelling) > limits.max_number_chars:
                raise InputError(source, "", f"a number spelt in {len(spelling)} characters; at most "
                                             f"{limits.max_number_chars}")
            value = kind(spelling)
            return value if math.isfinite(value) else constant(spelling)
        return convert

    def constant(spelling: str) -> _NonFinite:
        non_finite.append(_NonFinite(spelling[:20]))
        return non_finite[-1]

    def mapping(pairs: list[tuple[str, Any]]) -> dict:
        out = {}
        for key, value in pairs:
            if key in out:
                raise InputError(source, "", f"duplicate key {json.dumps(key)[:80]}")
            out[key] = value
        return out

    value = json.loads(text, parse_int=number(int), parse_float=number(float), parse_constant=constant,
                       object_pairs_hook=mapping)
    if non_finite:
        path, spelling = _first_non_finite(value)
        raise InputError(source, path, f"numbers must be finite, got {spelling}")
    return value


@dataclass
class _NonFinite:
    """Where JSON held NaN or an infinity: what it spelt."""

    spelling: str


def _first_non_finite(value: Any) -> tuple[str, str]:
    """(The field path, the spelling) of the first `_NonFinite` in `value`, in document order,
    without recursion (the depth is bounded already)."""
    stack = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _NonFinite):
            return path, item.spelling
        if isinstance(item, dict):
            stack.extend(reversed([(_join(path, str(k)), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(item)]))
    raise AssertionError("a non-finite number was read but is nowhere in the value")


def _join(path: str, key: str) -> str:
    """A mapping's key after the path to it, as the scenario's messages name fields."""
    key = key[:40]
    return f"{path}.{key}" if path else key


def _line_at(text: str, offset: int) -> str:
    return f"line {text.count(chr(10), 0, offset) + 1}"


def _short(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


def _size(n: int) -> str:
    return f"{n / MIB:g} MB"


# ---- YAML ------------------------------------------------------------------------

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's event parser when built with it


@dataclass
class _Open:
    """A list or mapping whose end has not been seen yet."""

    value: Any
    anchor: str | None
    line: int
    size: int = 1
    key: Any = None
    has_key: bool = False
    merges: list | None = None


def parse_yaml(text: str, source: str, limits: InputLimits = DEFAULT_LIMITS) -> Any:
    """One YAML document as plain data, built from the parser's events without recursion."""
    return _YamlBuilder(source, limits).build(text)


class _YamlBuilder:
    """Turns YAML events into plain data with an explicit stack (so depth costs no
    Python recursion), counting what aliases add."""

    def __init__(self, source: str, limits: InputLimits):
        self.source, self.limits = source, limits
        self.resolver = Resolver()
        self.scalars = SafeConstructor()
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.stack: list[_Open] = []
        self.aliased = 0
        self.documents = 0
        self.result: Any = None

    def fail(self, line: int, problem: str, field: str = "") -> NoReturn:
        raise InputError(self.source, f"line {line}: {field}" if field else f"line {line}", problem)

    def _field(self) -> str:
        """The field path of the scalar being read (`jobs[3].gpus`), as the scenario's messages
        name fields; a mapping's key is named by the path to its mapping."""
        path = ""
        for open_ in self.stack:
            if isinstance(open_.value, list):
                path += f"[{len(open_.value)}]"
            elif open_.has_key:
                path = _join(path, str(open_.key))
        return path

    def build(self, text: str) -> Any:
        try:
            for event in yaml.parse(text, Loader=_LOADER):
                self.event(event)
        except yaml.reader.ReaderError as e:
            code = e.character if isinstance(e.character, int) else ord(e.character)
            raise InputError(self.source, _line_at(text, e.position),
                             f"character 0x{code:02x} is not allowed in YAML (control characters are not)") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e)
            raise InputError(self.source, "", f"not valid YAML or JSON{where}: {problem}") from None
        return self.result

    def event(self, e: yaml.Event) -> None:
        line = e.start_mark.line + 1 if e.start_mark is not None else 0
        if type(e) is yaml.ScalarEvent:  # the common case first: most events are scalars
            self.add(self.scalar(e, line), 1, e.anchor, line)
        elif isinstance(e, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                self.fail(line, "must hold one YAML document, found a second")
        elif isinstance(e, yaml.AliasEvent):
            if e.anchor not in self.anchors:
                self.fail(line, f"alias *{e.anchor} names no complete anchor before it")
            value, size = self.anchors[e.anchor]
            self.aliased += size
            if self.aliased > self.limits.alias_budget:
                self.fail(line, f"aliases expand to more than {self.limits.alias_budget} nodes (an alias bomb?)")
            self.add(value, size, None, line)
        elif isinstance(e, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            mapping = isinstance(e, yaml.MappingStartEvent)
            if e.tag not in (None, "!", f"{_TAG}{'map' if mapping else 'seq'}"):
                self.fail(line, f"the tag {_short(e.tag)} is not accepted (plain lists and mappings only)")
            if len(self.stack) >= self.limits.max_depth:
                self.fail(line, f"nests deeper than {self.limits.max_depth} levels")
            self.stack.append(_Open({} if mapping else [], e.anchor, line))
        elif isinstance(e, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            done = self.stack.pop()
            value = done.value
            if done.merges:
                merged: dict = {}
                for source in done.merges:
                    for k, v in source.items():
                        merged.setdefault(k, v)
                value = {**merged, **value}
            self.add(value, done.size, done.anchor, done.line)

    def scalar(self, e: yaml.ScalarEvent, line: int) -> Any:
        tag, text = e.tag, e.value
        if tag is None and e.implicit[0] and text.isascii() and text.isdigit() and (text[0] != "0" or text == "0") \
                and len(text) <= self.limits.max_number_chars:
            return int(text)  # a plain decimal: what the resolver and constructor would make of it, faster
        tag = self._resolved(e)
        if tag == f"{_TAG}str":
            return text
        if tag not in _SCALARS:
            self._refuse(tag, e, line)
        if tag == f"{_TAG}merge":
            return _MERGE
        return self._constructed(tag, e, line)

    def _resolved(self, e: yaml.ScalarEvent) -> str:
        """The scalar's tag: its own, else what YAML resolves it to, with 1e30 a float."""
        tag = e.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(ScalarNode, e.value, e.implicit)
        if tag == f"{_TAG}str" and e.implicit[0] and _EXPONENT_FLOAT.match(e.value):
            tag = f"{_TAG}float"  # 1e30: text to YAML 1.1, a number to YAML 1.2 and JSON, so to us
        return tag

    def _refuse(self, tag: str, e: yaml.ScalarEvent, line: int) -> NoReturn:
        kind = {f"{_TAG}timestamp": "dates and times are", f"{_TAG}binary": "binary data is"}.get(tag)
        if kind:
            self.fail(line, f"{kind} not accepted, got {e.value[:40]!r} (quote it to make it text)")
        self.fail(line, f"the tag {_short(tag)} is not accepted (plain text, numbers, true/false and null only)")

    def _constructed(self, tag: str, e: yaml.ScalarEvent, line: int) -> Any:
        """A number, true/false or null as PyYAML's safe constructor makes it, bounded and finite."""
        if tag in (f"{_TAG}int", f"{_TAG}float") and len(e.value) > self.limits.max_number_chars:
            self.fail(line, f"a number spelt in {len(e.value)} characters; at most {self.limits.max_number_chars}")
        node = ScalarNode(tag, e.value)
        value = {f"{_TAG}str": self.scalars.construct_yaml_str, f"{_TAG}int": self.scalars.construct_yaml_int,
                 f"{_TAG}float": self.scalars.construct_yaml_float, f"{_TAG}bool": self.scalars.construct_yaml_bool,
                 f"{_TAG}null": self.scalars.construct_yaml_null}[tag](node)
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(line, f"numbers must be finite, got {e.value[:40]}", self._field())
        return value

    def add(self, value: Any, size: int, anchor: str | None, line: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.result = value
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
        elif not top.has_key:
            if isinstance(value, (list, dict)):
                self.fail(line, "a mapping key must be plain text or a number, not a list or mapping")
            if value is not _MERGE and value in top.value:
                self.fail(line, f"duplicate key {json.dumps(value)[:80]}")
            top.key, top.has_key = value, True
        else:
            top.has_key = False
            if top.key is _MERGE:
                sources = value if isinstance(value, list) else [value]
                if not all(isinstance(s, dict) for s in sources):
                    self.fail(line, "a merge key (<<) takes a mapping or a list of mappings")
                top.merges = (top.merges or []) + sources
            else:
                top.value[top.key] = value


__all__ = ["DEFAULT_LIMITS", "InputLimits", "MIB", "decode", "load_file", "parse_json", "parse_text", "parse_yaml",
           "read_text"]
