"""Trace tables: the checks every CSV trace loader needs, in one place.

`read_rows` reads a file through `gpu_policy.model.safe_load` (size limit, UTF-8),
checks that the header names every needed column exactly once, and turns the
csv module's parse errors into one line; `cell_text` and `cell_number` read one
checked cell. Every problem is a `TraceError` naming the file, line and field,
e.g. ``jobs.csv: line 3: gpus: must be from 1 to 65,536, got '0'``.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from gpu_policy.errors import InputError, TraceError
from gpu_policy.model.safe_load import DEFAULT_LIMITS, InputLimits, read_text

#: Longest spelling of a number read from a cell (longer is refused, not parsed).
MAX_NUMBER_CHARS = 40

Row = dict[str, str]


def read_rows(path: Path, columns: tuple[str, ...], limits: InputLimits = DEFAULT_LIMITS,
              max_rows: int | None = None) -> list[tuple[int, Row]]:
    """The CSV rows of `path` as (line, row), after checking the header names `columns`;
    at least one row, at most `max_rows`."""
    try:
        text = read_text(path, limits)
    except InputError as e:
        raise TraceError(str(e)) from None
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    rows = []
    try:
        header = reader.fieldnames or []
        doubled = sorted({c for c in header if header.count(c) > 1})
        if doubled:
            raise TraceError(f"{path}: header: column {doubled[0]!r} appears twice")
        missing = [c for c in columns if c not in header]
        if missing:
            raise TraceError(f"{path}: header: missing column {missing[0]!r} (needs {', '.join(columns)})")
        for row in reader:
            if max_rows is not None and len(rows) >= max_rows:
                raise TraceError(f"{path}: line {reader.line_num}: must have at most {max_rows:,} rows")
            rows.append((reader.line_num, row))
    except csv.Error as e:  # the csv module's own parse error: an unbalanced quote, a huge field
        raise TraceError(f"{path}: line {reader.reader.line_num}: not valid CSV: {e}") from None
    if not rows:
        raise TraceError(f"{path}: no rows")
    return rows


def cell_text(path: Path, line: int, row: Row, field: str) -> str:
    """A cell that must hold some text, stripped."""
    value = (row.get(field) or "").strip()
    if not value:
        raise TraceError(f"{path}: line {line}: {field}: must not be empty")
    return value


def cell_number(path: Path, line: int, row: Row, field: str, *, low: float | None = None,
                high: float | None = None, above: bool = False, whole: bool = False) -> float:
    """A cell's finite number (whole when asked) within [low, high] (``above``: strictly above `low`)."""
    text = (row.get(field) or "").strip()
    try:
        value = float(text) if len(text) <= MAX_NUMBER_CHARS else math.nan
    except ValueError:
        value = math.nan
    where = f"{path}: line {line}: {field}"
    if not math.isfinite(value):
        raise TraceError(f"{where}: must be {'a whole number' if whole else 'a number'}, "
                         f"got {text[:MAX_NUMBER_CHARS]!r}")
    if whole and not value.is_integer():
        raise TraceError(f"{where}: must be a whole number, got {text!r}")
    too_low = low is not None and (value <= low if above else value < low)
    if too_low or (high is not None and value > high):
        if low is not None and high is not None and not above:
            rule = f"from {_shown(low)} to {_shown(high)}"
        else:
            rule = " and ".join(([f"{'>' if above else '>='} {_shown(low)}"] if low is not None else [])
                                + ([f"<= {_shown(high)}"] if high is not None else []))
        raise TraceError(f"{where}: must be {rule}, got {text!r}")
    return value


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"
