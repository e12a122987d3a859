"""Status bodies shaped like the real API server's."""

from __future__ import annotations

REASONS = {404: "NotFound", 409: "Conflict", 410: "Expired", 429: "TooManyRequests", 500: "InternalError",
           503: "ServiceUnavailable", 403: "Forbidden", 422: "Invalid"}


def status(code: int, reason: str, message: str, details: dict | None = None):
    """(code, Status body, no extra headers)."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure" if code >= 400 else "Success",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return code, body, {}


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]], group: str = ""):
    """422 Invalid, as field validation answers: `causes` are (field, cause reason, message),
    e.g. ("spec.schedulingGates", "FieldValueForbidden", "Forbidden: only deletion is allowed ...")."""
    summary = ", ".join(f"{f}: {m}" for f, _, m in causes)
    return status(422, "Invalid", f'{kind} "{name}" is invalid: {summary}' if len(causes) == 1
                  else f'{kind} "{name}" is invalid: [{summary}]',
                  {"name": name, "group": group, "kind": kind,
                   "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes]})
