"""Reading an API server's answers with bounds, whatever the server sends (docs/security.md).

A body is read in pieces as they arrive, each read waiting at most until a total deadline
(a server that drips one byte a second cannot stretch a request), decompressed incrementally
with a cap on the decompressed size (a gzip bomb stops at the cap), and parsed as JSON with
bounded nesting. A watch reuses the same reader per event: `BoundedBody.lines` yields one
line at a time, each under the same size cap and the stream under its deadline.

`BoundedPool` sits between the `kubernetes` client and urllib3, so the client's own error
path (which reads a refused request's body whole) gets the bounded body too.
"""

from __future__ import annotations

import json
import math
import threading
import time
import zlib
from typing import Any, Callable, Iterator

from urllib3.exceptions import ReadTimeoutError

#: what one read asks the socket for: small enough to check the deadline often
_PIECE = 64 * 1024


class BodyRefused(Exception):
    """The answer broke a bound (too large, too slow, nested too deeply); `reason` says which."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class BoundedBody:
    """The body of one urllib3 response, read within `deadline` (a `monotonic()` value) and
    at most `max_bytes` once decompressed."""

    def __init__(self, response, deadline: float, max_bytes: int, monotonic: Callable[[], float] = time.monotonic):
        self._response = response
        self._deadline = deadline
        self._max = max_bytes
        self._monotonic = monotonic
        self._read = 0
        encoding = (response.headers.get("Content-Encoding") or "").strip().lower()
        # gzip or zlib by their headers (wbits 32+); a raw deflate stream by negative wbits
        self._inflate = zlib.decompressobj(47) if encoding in ("gzip", "x-gzip") else \
            zlib.decompressobj(-15) if encoding == "deflate" else None

    def read_all(self) -> bytes:
        """The whole body; BodyRefused when it is larger than the cap or late."""
        pieces = list(self._pieces())
        return b"".join(pieces)

    def lines(self) -> Iterator[bytes]:
        """The body line by line (a watch's events), each line under the size cap. A line
        that arrives in many pieces is joined once, not grown piece by piece."""
        parts, size = [], 0
        for piece in self._pieces(cap_total=False):
            *complete, rest = piece.split(b"\n")
            if complete:
                yield from (line for line in [b"".join(parts) + complete[0], *complete[1:]] if line.strip())
                parts, size = [], 0
            if rest:
                parts.append(rest)
                size += len(rest)
            if size > self._max:
                raise BodyRefused(f"one line of the answer is larger than {self._max:,} bytes")
        tail = b"".join(parts)
        if tail.strip():
            yield tail

    def _pieces(self, cap_total: bool = True) -> Iterator[bytes]:
        sock = _socket_of(self._response)
        while True:
            left = self._deadline - self._monotonic()
            if left <= 0:
                raise BodyRefused(f"the answer took longer than its deadline ({self._read:,} bytes read)")
            if sock is not None:
                sock.settimeout(left)
            try:
                raw = self._response.read1(_PIECE, decode_content=False)
            except (TimeoutError, ReadTimeoutError):
                raw = None  # the socket waited until the deadline
            if raw is None:
                continue
            if not raw:
                tail = self._inflate.flush() if self._inflate is not None else b""
                if tail:
                    yield self._count(tail, cap_total)
                return
            yield from self._decoded(raw, cap_total)

    def _decoded(self, raw: bytes, cap_total: bool) -> Iterator[bytes]:
        if self._inflate is None:
            yield self._count(raw, cap_total)
            return
        data = raw
        while data:
            try:
                out = self._inflate.decompress(data, self._max + 1)
            except zlib.error:
                raise BodyRefused("the answer says it is compressed, but it does not decompress") from None
            yield self._count(out, cap_total)
            data = self._inflate.unconsumed_tail

    def _count(self, piece: bytes, cap_total: bool) -> bytes:
        self._read = self._read + len(piece) if cap_total else len(piece)
        if self._read > self._max:
            raise BodyRefused(f"the answer is larger than {self._max:,} bytes")
        return piece


def _socket_of(response):
    """The socket under a urllib3 response (to bound each read by the deadline); None when
    urllib3 does not expose one (then its own read timeout still bounds each read)."""
    connection = getattr(response, "connection", None)
    return getattr(connection, "sock", None)


def parse_json(data: bytes) -> Any:
    """JSON from an answer; BodyRefused when it is not JSON or nested too deeply to parse
    (deeper than the interpreter's recursion limit, which bounds the parser)."""
    try:
        return json.loads(data) if data else {}
    except RecursionError:
        raise BodyRefused("the answer is JSON nested too deeply") from None
    except ValueError:
        raise BodyRefused("the answer is not JSON") from None


def retry_after(value: str | None, floor_s: float, ceiling_s: float) -> float | None:
    """A `Retry-After` header in seconds, clamped to [floor_s, ceiling_s]; None when absent
    or not a number of seconds (an HTTP date, nan, a negative number): the caller backs off."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(max(seconds, floor_s), ceiling_s)


class _ReadResponse:
    """A response whose body was read (bounded): what the `kubernetes` client uses of it."""

    def __init__(self, response, data: bytes):
        self.status = response.status
        self.reason = response.reason
        self.headers = response.headers
        self.data = data

    def getheaders(self):
        return self.headers

    def getheader(self, name, default=None):
        return self.headers.get(name, default)


class BoundedPool:
    """Wraps the client's urllib3 pool manager: an answer's body is read bounded before the
    client sees it. The bounds come from the calling thread's `within(...)` and hold for
    its next request; without them the answer passes through untouched (a caller streaming
    a watch reads it itself through `BoundedBody.lines`)."""

    def __init__(self, pool):
        self._pool = pool
        self._local = threading.local()

    def within(self, deadline: float, max_bytes: int) -> None:
        """Bound the calling thread's next request: `deadline` (time.monotonic) and size."""
        self._local.bounds = (deadline, max_bytes)

    def request(self, *args, **kwargs):
        response = self._pool.request(*args, **kwargs)
        bounds = self._local.__dict__.pop("bounds", None)  # for this request only
        if bounds is None or kwargs.get("preload_content", True):
            return response
        try:
            data = BoundedBody(response, *bounds).read_all()
        except BaseException:
            response.close()  # a body left half read cannot carry another request
            raise
        response.release_conn()
        return _ReadResponse(response, data)

    def __getattr__(self, name):
        return getattr(self._pool, name)


def bounded_pool(api_client) -> BoundedPool:
    """The api_client's pool manager wrapped once (clients sharing an api_client share it)."""
    rest = api_client.rest_client
    if not isinstance(rest.pool_manager, BoundedPool):
        rest.pool_manager = BoundedPool(rest.pool_manager)
    return rest.pool_manager
