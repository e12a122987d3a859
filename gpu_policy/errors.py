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


class ClusterError(GpuPolicyError):
    """A live cluster could not be read or written as gpu-policy needs."""


class ClusterUnavailable(ClusterError):
    """The API server did not answer, or kept refusing within the deadline (429, 5xx)."""


class ClusterAccessDenied(ClusterError):
    """The API server refused a request (401 or 403): the account lacks a permission."""


class ClusterBusy(ClusterError):
    """Another planner held the planning lease for longer than we were willing to wait."""


class ClusterObjectError(ScenarioError, ClusterError):
    """A cluster object breaks the contract (docs/kubernetes.md).

    The message is one line: ``KIND NAMESPACE/NAME: field.path: must be ..., got ...``.
    """
