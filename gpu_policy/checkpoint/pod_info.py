"""The pod's annotations as the kubelet writes them into a downward-API volume.

The file holds one ``key="value"`` line per annotation, keys sorted, no newline after the
last, each value quoted as Go's ``strconv.Quote`` writes it (``%q``: ``\\"``, ``\\\\``,
``\\n``, ``\\t``, ``\\xNN``, ``\\uNNNN``, ...). The kubelet replaces it atomically (a new
folder, then the ``..data`` symlink swapped), so a changed file has a new inode or mtime:
`PodInfoFile` stats it at each look and reads it only then. What it reads is bounded; a
file that breaks the format is one warning and no annotations, never a crash.
"""

from __future__ import annotations

import logging
import os
import re

log = logging.getLogger(__name__)

#: four times the API server's limit on all of a pod's annotations (256 KiB), for the quoting
MAX_BYTES = 1 << 20
MAX_LINES = 10_000
#: a qualified name: a DNS subdomain prefix (253), "/", a name (63)
MAX_KEY = 317
#: the API server's limit on all annotations together
MAX_VALUE = 256 << 10

_KEY = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?\Z")
_SIMPLE = {"a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v", "\\": b"\\",
           '"': b'"'}
# one piece of a quoted value: plain text, or one escape Go's strconv.Unquote accepts
_PIECE = re.compile(r'([^"\\]+)|\\(?:([abfnrtv\\"])|x([0-9A-Fa-f]{2})|([0-3][0-7]{2})|u([0-9A-Fa-f]{4})'
                    r'|U([0-9A-Fa-f]{8}))')


class PodInfoError(ValueError):
    """The file is not in the kubelet's format (the message says where)."""


def unquote(quoted: str) -> str:
    """The text of a Go double-quoted string literal (strconv.Unquote's rules)."""
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
        raise PodInfoError("a value must be in double quotes")
    body, out, pos = quoted[1:-1], bytearray(), 0
    while pos < len(body):
        piece = _PIECE.match(body, pos)
        if piece is None:
            raise PodInfoError(f"bad escape or bare quote at {body[pos:pos + 12]!r}")
        plain, simple, byte, octal, short, long = piece.groups()
        if plain is not None:
            out += plain.encode()
        elif simple is not None:
            out += _SIMPLE[simple]
        elif byte or octal:
            out.append(int(byte, 16) if byte else int(octal, 8))
        else:
            code = int(short or long, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise PodInfoError(f"\\u escape {code:#x} is no Unicode character")
            out += chr(code).encode()
        pos = piece.end()
        if len(out) > MAX_VALUE:
            raise PodInfoError(f"a value longer than {MAX_VALUE} bytes")
    return out.decode("utf-8", errors="replace")


def parse_annotations(text: str) -> dict[str, str]:
    """The annotations in the kubelet's format; `PodInfoError` naming the line otherwise."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # an empty file, or one newline at the end
    if len(lines) > MAX_LINES:
        raise PodInfoError(f"more than {MAX_LINES} lines")
    annotations: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        key, sep, quoted = line.partition("=")
        if not sep or len(key) > MAX_KEY or not _KEY.match(key):
            raise PodInfoError(f"line {number}: must be key=\"value\" with an annotation key, got {line[:60]!r}")
        if key in annotations:
            raise PodInfoError(f"line {number}: {key} appears twice")
        try:
            annotations[key] = unquote(quoted)
        except PodInfoError as e:
            raise PodInfoError(f"line {number} ({key}): {e}") from None
    return annotations


class PodInfoFile:
    """The annotations file at `path`: `annotations()` re-reads it only when it changed."""

    def __init__(self, path: str):
        self.path = path
        self._seen: tuple | None = None
        self._annotations: dict[str, str] = {}

    def annotations(self) -> dict[str, str]:
        """The pod's annotations now; {} when the file is absent or unreadable (said once per
        version of the file), or not in the kubelet's format."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._annotations = None, {}
            return self._annotations
        except OSError as e:
            return self._give_up(("stat", e.errno), f"cannot read it: {e.strerror}")
        version = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if version == self._seen:
            return self._annotations
        if st.st_size > MAX_BYTES:
            return self._give_up(version, f"larger than {MAX_BYTES} bytes ({st.st_size})")
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
            if len(data) > MAX_BYTES:
                return self._give_up(version, f"larger than {MAX_BYTES} bytes")
            annotations = parse_annotations(data.decode("utf-8"))
        except OSError as e:
            return self._give_up(version, f"cannot read it: {e.strerror}")
        except UnicodeDecodeError as e:
            return self._give_up(version, f"not UTF-8 at byte {e.start}")
        except PodInfoError as e:
            return self._give_up(version, str(e))
        self._seen, self._annotations = version, annotations
        return annotations

    def _give_up(self, version: tuple, why: str) -> dict[str, str]:
        if version != self._seen:
            log.warning("%s: not the kubelet's annotations file (%s); taken as no checkpoint request", self.path, why)
        self._seen, self._annotations = version, {}
        return self._annotations
