"""A bounded HTTP GET for JSON answers (Prometheus's API), on the standard library.

Bounded in time (one deadline for the whole request, from connect to the last
byte: a server that trickles a byte every two seconds is cut off at it), in
size (`max_bytes`) and in depth (`gpu_policy.model.safe_load`). TLS certificates and
host names are verified unless the caller opts out. Credentials in the URL
(``https://user:password@host``) are sent as HTTP Basic auth and never appear in
a message: `redact_url` is applied to every URL this module names.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit

from gpu_policy.errors import InputError
from gpu_policy.model.safe_load import InputLimits, decode, parse_json

_CHUNK = 1 << 16


class HttpFailure(Exception):
    """Why a request gave no usable answer; `retry` says whether trying again may help."""

    def __init__(self, problem: str, retry: bool = True):
        super().__init__(problem)
        self.problem, self.retry = problem, retry


def redact_url(url: str) -> str:
    """`url` without secrets: the password and the query's values become ``***``."""
    try:
        parts = urlsplit(url)
        user, host = parts.username, parts.hostname
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not even a URL: show only its scheme, if any
        return url.split("://", 1)[0] + "://***" if "://" in url else "***"
    netloc = parts.netloc
    if user is not None or parts.password is not None:
        netloc = f"{user or ''}{':***' if parts.password is not None else ''}@{host or ''}{port}"
    query = "&".join(f"{pair.split('=', 1)[0]}=***" for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class _Deadline:
    """Mixed into a socket class: every receive may wait only until `deadline`."""

    deadline = float("inf")

    def recv_into(self, buffer, *args):
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline reached")
        self.settimeout(remaining)
        return super().recv_into(buffer, *args)


class _DeadlineSocket(_Deadline, socket.socket):
    pass


class _DeadlineSSLSocket(_Deadline, ssl.SSLSocket):
    pass


class _Connection(http.client.HTTPConnection):
    def connect(self):
        super().connect()
        plain = _DeadlineSocket(fileno=self.sock.detach())
        plain.deadline = self.deadline
        plain.settimeout(self.timeout)
        self.sock = plain


class _TlsConnection(http.client.HTTPSConnection):
    def connect(self):
        http.client.HTTPConnection.connect(self)  # TCP, then TLS on our own socket class
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host)
        self.sock.deadline = self.deadline


def get_json(url: str, path: str, params: dict[str, str], *, timeout_s: float, max_bytes: int,
             verify_tls: bool = True, max_depth: int = 32) -> Any:
    """GET ``url + path?params`` and parse the JSON answer, all within `timeout_s` seconds."""
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout_s
    if parts.scheme == "https":
        context = ssl.create_default_context()
        if not verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        context.sslsocket_class = _DeadlineSSLSocket
        conn: http.client.HTTPConnection = _TlsConnection(parts.hostname, parts.port, timeout=timeout_s,
                                                          context=context)
    else:
        conn = _Connection(parts.hostname, parts.port, timeout=timeout_s)
    conn.deadline = deadline
    headers = {"Accept": "application/json"}
    if parts.username is not None:
        secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(secret).decode()
    target = f"{parts.path.rstrip('/')}{path}?{urlencode(params)}"
    try:
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
        body = _read_bounded(response, max_bytes)
    except ssl.SSLCertVerificationError as e:
        raise HttpFailure(f"has a TLS certificate that does not verify ({e.verify_message}); "
                          "--prometheus-insecure skips the check", retry=False) from None
    except (TimeoutError, socket.timeout):
        raise HttpFailure(f"did not answer within {timeout_s:g} s") from None
    except ConnectionRefusedError:
        raise HttpFailure("is unreachable (connection refused)") from None
    except socket.gaierror:
        raise HttpFailure("is unreachable (name or service not known)") from None
    except http.client.HTTPException as e:
        raise HttpFailure(f"sent malformed data ({type(e).__name__})") from None
    except OSError as e:  # reset, unreachable network, TLS failure
        raise HttpFailure(f"is unreachable ({e.strerror or type(e).__name__})") from None
    finally:
        conn.close()
    if response.status >= 400:
        raise HttpFailure(f"answered HTTP {response.status}", retry=response.status >= 500)
    try:
        return parse_json(decode(body, "answer"), "answer", InputLimits(max_bytes=max(1, max_bytes),
                                                                      max_depth=max_depth))
    except (InputError, json.JSONDecodeError) as e:
        raise HttpFailure(f"sent malformed data ({type(e).__name__}: {str(e)[:120]})") from None


def _read_bounded(response: http.client.HTTPResponse, max_bytes: int) -> bytes:
    declared = response.getheader("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise HttpFailure(f"sent an answer of {int(declared):,} bytes, above the {max_bytes:,}-byte limit")
    body = bytearray()
    while chunk := response.read1(_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            raise HttpFailure(f"sent an answer larger than the {max_bytes:,}-byte limit")
    return bytes(body)


__all__ = ["HttpFailure", "get_json", "redact_url"]
