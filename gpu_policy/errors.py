"""gpu-policy's own exceptions: callers catch these, never a library's."""


class GpuPolicyError(Exception):
    """Base of every error gpu-policy raises on purpose."""


class ScenarioError(GpuPolicyError, ValueError):
    """A scenario file is unreadable or breaks the contract.

    The message is one line: ``FILE: field.path: must be ..., got ...``.
    """

    def __init__(self, source: str, field: str, problem: str):
        self.source = source
        self.field = field
        self.problem = problem
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}: {problem}" if field else f"{where}{problem}")


class SolverError(GpuPolicyError):
    """The solver could not be run or returned no usable solution."""


class TraceError(GpuPolicyError, ValueError):
    """A workload trace is unreadable or malformed: one line naming file, line and field."""
