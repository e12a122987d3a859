"""gpu-policy's own exceptions: callers catch these, never a library's.

Every message is one line of at most `MESSAGE_LIMIT` characters: control
characters (a newline in a YAML key, an escape sequence in a file name) are
shown escaped, and what is longer is cut, so that a hostile input can neither
split the line nor flood the terminal.
"""

from __future__ import annotations

MESSAGE_LIMIT = 300
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` on one printable line of at most `limit` characters."""
    if text.isprintable() and len(text) <= limit:
        return text
    out, size = [], 0
    for ch in text:
        if ch.isprintable() or ch == " ":
            shown = ch
        elif ch in _ESCAPES:
            shown = _ESCAPES[ch]
        else:  # control, format (bidi overrides), line and paragraph separators, unassigned
            code = ord(ch)
            shown = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
        size += len(shown)
        if size > limit - 3:
            out.append("...")
            break
        out.append(shown)
    return "".join(out)


def job_path(index: int, name: object) -> str:
    """Where a job is in messages: ``jobs[9] (name: b-3)``, its place and, when it has one, its
    name (bounded), so a person finds it in a long file or a snapshot."""
    if isinstance(name, str) and name:
        return f"jobs[{index}] (name: {name if len(name) <= 60 else name[:60] + '...'})"
    return f"jobs[{index}]"


class GpuPolicyError(Exception):
    """Base of every error gpu-policy raises on purpose; its message is made one line."""

    def __init__(self, message: str = "", *args):
        super().__init__(one_line(str(message)), *args)


class InputError(GpuPolicyError, ValueError):
    """A file or text gpu-policy was given is unreadable or breaks its contract.

    The message is one line: ``FILE: field.path: must be ..., got ...``.
    """

    def __init__(self, source: str, field: str, problem: str):
        self.source = source
        self.field = field
        self.problem = problem
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}: {problem}" if field else f"{where}{problem}")


class ScenarioError(InputError):
    """A scenario file is unreadable or breaks the contract."""


class SolverError(GpuPolicyError):
    """The solver could not be run or returned no usable solution."""


class TraceError(GpuPolicyError, ValueError):
    """A workload trace is unreadable or malformed: one line naming file, line and field."""


class ClusterError(GpuPolicyError):
    """A live cluster could not be read or written as gpu-policy needs."""


class ClusterUnavailable(ClusterError):
    """The API server did not answer, or kept refusing within the deadline (429, 5xx);
    `retry_after`: the seconds its last answer asked to wait (Retry-After), where it did."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ClusterAccessDenied(ClusterError):
    """The API server refused a request (401 or 403): the account lacks a permission."""


class ClusterBusy(ClusterError):
    """Another planner held the planning lease for longer than we were willing to wait."""


class ClusterObjectError(ScenarioError, ClusterError):
    """A cluster object breaks the contract (docs/kubernetes.md).

    The message is one line: ``KIND NAMESPACE/NAME: field.path: must be ..., got ...``.
    """


class UsageError(GpuPolicyError, ValueError):
    """A command-line option or API argument is out of range: ``--option: must be ..., got ...``."""


def install_hint(extra: str) -> str:
    """How to get an extra: with gpu-policy from its checkout or wheel, never from a package
    index by name, where the name is not ours (docs/install.md)."""
    return f"install gpu-policy with its [{extra}] extra, from a checkout or its wheel (docs/install.md)"


class MissingExtra(GpuPolicyError, ImportError):
    """An optional library is not installed; the message says which extra brings it."""

    def __init__(self, what: str, module: str, extra: str):
        self.module, self.extra = module, extra
        super().__init__(f"{what} needs {module}: {install_hint(extra)}")


__all__ = ["ClusterAccessDenied", "ClusterBusy", "ClusterError", "ClusterObjectError", "ClusterUnavailable",
           "GpuPolicyError", "InputError", "MESSAGE_LIMIT", "MissingExtra", "ScenarioError", "SolverError",
           "TraceError", "UsageError", "one_line"]
