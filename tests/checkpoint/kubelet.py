"""The kubelet's side of a downward-API volume of `metadata.annotations`, for tests: the file's
format (Go's ``%v=%q`` lines, keys sorted) and its atomic replacement (a new timestamped folder,
then the ``..data`` symlink swapped), as kubernetes/pkg/volume/util/atomic_writer.go does it."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

_SIMPLE = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
           '"': '\\"', "\\": "\\\\"}
_versions = itertools.count()


def go_quote(text: str) -> str:
    """Go's strconv.Quote: printable characters as they are, the rest escaped."""
    out = []
    for char in text:
        code = ord(char)
        if char in _SIMPLE:
            out.append(_SIMPLE[char])
        elif char.isprintable():  # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols, ' '
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def format_annotations(annotations: dict[str, str]) -> str:
    """fieldpath.FormatMap: one key=%q line per annotation, sorted, no newline after the last."""
    return "\n".join(f"{key}={go_quote(annotations[key])}" for key in sorted(annotations))


def write_volume(folder: Path, annotations: dict[str, str] | None = None, raw: bytes | None = None) -> Path:
    """Publish a new version of the volume in `folder` (the annotations, or `raw` bytes) as
    the kubelet does; the path the container reads, FOLDER/annotations."""
    folder.mkdir(parents=True, exist_ok=True)
    version = folder / f"..2026_01_01_00_00_00.{next(_versions)}"
    version.mkdir()
    data = raw if raw is not None else format_annotations(annotations or {}).encode()
    (version / "annotations").write_bytes(data)
    old = os.readlink(folder / "..data") if (folder / "..data").is_symlink() else None
    os.symlink(version.name, folder / "..data_tmp")
    os.replace(folder / "..data_tmp", folder / "..data")  # the atomic swap
    if not (folder / "annotations").is_symlink():
        os.symlink("..data/annotations", folder / "annotations")
    if old:
        shutil.rmtree(folder / old)
    return folder / "annotations"
