"""DCGM queries through a `PrometheusConnect` of the caller's own (prometheus-api-client, the
`[prometheus]` extra): its URL, auth, headers, TLS and proxy, as they configured it.

Its failures are worded as the bounded client's (`HttpFailure`), with no text of the
library's own (which may quote the server's answer), so the caller's retries and one-line
messages are the same either way. What it cannot bound, and the measurements behind keeping
gpu-policy's own client the default, are in docs/telemetry.md ("Your own PrometheusConnect").
"""

from __future__ import annotations

import re
import socket
from datetime import datetime, timezone
from typing import Any

from gpu_policy.telemetry.http import HttpFailure

_STATUS = re.compile(r"HTTP Status Code (\d{3})")


def client_result(client: Any, endpoint: str, params: dict[str, str], timeout_s: float) -> Any:
    """The `data.result` of one query (`endpoint` query or query_range) through `client`,
    each socket operation within `timeout_s`; HttpFailure when it gives none."""
    import requests
    from prometheus_api_client import PrometheusApiClientException

    try:
        if endpoint == "query_range":
            return client.custom_query_range(params["query"], start_time=_moment(params["start"]),
                                             end_time=_moment(params["end"]), step=params["step"], timeout=timeout_s)
        return client.custom_query(params["query"], timeout=timeout_s)
    except PrometheusApiClientException as e:  # a status outside 200 that the client did not retry
        found = _STATUS.search(str(e))
        code = int(found.group(1)) if found else 0
        raise HttpFailure(f"answered HTTP {code}" if code else "answered an error", retry=not code or code >= 500) \
            from None
    except requests.exceptions.RetryError:  # 408, 429 or 5xx until the client's own retries ran out
        raise HttpFailure("answered an error status until the PrometheusConnect's own retries ran out",
                          retry=False) from None
    except requests.exceptions.SSLError:
        raise HttpFailure("has a TLS certificate that does not verify (the PrometheusConnect's session decides "
                          "what is trusted)", retry=False) from None
    except requests.exceptions.Timeout:
        raise HttpFailure(f"did not answer within {timeout_s:g} s (a read timeout, not a deadline)") from None
    except requests.exceptions.ConnectionError as e:
        raise HttpFailure(f"is unreachable ({_why_unreachable(e)})") from None
    except requests.exceptions.RequestException as e:  # a broken chunk, a bad encoding
        raise HttpFailure(f"sent malformed data ({type(e).__name__})") from None
    except RecursionError:  # the client parses JSON without a bound on its nesting
        raise HttpFailure("sent malformed data (JSON nested too deep to read)") from None
    except (ValueError, KeyError, TypeError) as e:  # not JSON, or JSON without data.result
        raise HttpFailure(f"sent malformed data ({type(e).__name__})") from None


def _moment(text: str) -> datetime:
    return datetime.fromtimestamp(float(text), timezone.utc)


def _why_unreachable(error: BaseException) -> str:
    """The root of a connection error, in the bounded client's words where it has them."""
    seen: BaseException | None = error
    for _ in range(8):  # requests wraps urllib3's error, which wraps the socket's: a few levels
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "name or service not known"
        nested = [a for a in getattr(seen, "args", ()) if isinstance(a, BaseException)]
        seen = getattr(seen, "reason", None) or (nested[0] if nested else None) or seen.__cause__ or seen.__context__
    return type(error).__name__
