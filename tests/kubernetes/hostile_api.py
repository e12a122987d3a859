"""An API server that misbehaves on purpose, for the bounded HTTP layer's tests.

Raw stdlib HTTP on 127.0.0.1, port 0. Every GET answers in one `mode`:

- ``drip``: a JSON body promised whole, sent one byte every 0.2 s;
- ``endless``: a chunked body that never ends;
- ``endless-pages``: an empty page with a new continue token, forever;
- ``endless-items``: a page of one node with a new continue token, forever;
- ``same-token``: a page that always hands out the same continue token;
- ``gzip-bomb``: 1 GiB of zeros gzipped (about 1 MB on the wire);
- ``huge``: a valid list of 100 MB;
- ``deep``: JSON nested 200,000 deep;
- ``html``: an HTML page with status 200;
- ``reset``: the connection closed as soon as the request arrives;
- ``retry-after:VALUE``: 429 with that Retry-After, then (second request on) an empty list;
- ``json:TEXT``: 200 with that body (wrong types, for per-object isolation).

It stops what it is sending when the client goes away or the server stops.
`with HostileApi("drip") as api:` stops it on exit; `api.requests` counts what it answered.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import zlib
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.serving import serve_in_thread


@lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """1 GiB of zeros, gzip-compressed once per test session (about 1 MB)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join([squeeze.compress(block) for _ in range(1024)] + [squeeze.flush()])


class HostileApi:
    def __init__(self, mode: str):
        self.mode = mode
        self.requests = 0
        self.stopping = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            #: as a real API server (Go sets TCP_NODELAY): a body written after its headers
            #: is not held back ~40 ms waiting for the client's delayed ACK
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                api.requests += 1
                try:
                    api.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda *args: None  # a client that goes away is what these tests do
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HostileApi:
        serve_in_thread(self._server)
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def kubeconfig(self, path) -> str:
        path.write_text(f"""apiVersion: v1
kind: Config
current-context: hostile
clusters: [{{name: hostile, cluster: {{server: "{self.url}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: hostile, context: {{cluster: hostile, user: u}}}}]
""")
        return str(path)

    # -- the answers -------------------------------------------------------------------------
    def answer(self, h: BaseHTTPRequestHandler) -> None:
        mode, _, arg = self.mode.partition(":")
        if mode == "reset":
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.close_connection = True
            return
        if mode == "drip":
            body = json.dumps({"items": []}).encode() + b" " * 1000
            self._head(h, 200, {"Content-Length": str(len(body))})
            for byte in body:
                if self.stopping.wait(0.2):
                    return
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
            return
        if mode == "endless":
            self._head(h, 200, {"Transfer-Encoding": "chunked"})
            piece = b" " * 65536
            while not self.stopping.is_set():
                h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            return
        if mode == "endless-pages":
            self._json(h, 200, {"items": [], "metadata": {"continue": f"page-{self.requests}"}})
        elif mode == "endless-items":
            self._json(h, 200, {"items": [{"metadata": {"name": f"node-{self.requests}"}}],
                                "metadata": {"continue": f"page-{self.requests}"}})
        elif mode == "same-token":
            self._json(h, 200, {"items": [], "metadata": {"continue": "again"}})
        elif mode == "gzip-bomb":
            self._send(h, 200, gzip_bomb(), {"Content-Encoding": "gzip"})
        elif mode == "huge":
            item = b'{"metadata": {"name": "' + b"x" * 1000 + b'"}}'
            self._send(h, 200, b'{"items": [' + b",".join([item] * 100_000) + b"]}")
        elif mode == "deep":
            self._send(h, 200, b'{"items": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")
        elif mode == "html":
            self._send(h, 200, b"<html><body>Sign in to continue</body></html>", {"Content-Type": "text/html"})
        elif mode == "retry-after":
            if self.requests == 1:
                self._json(h, 429, {"kind": "Status", "message": "slow down"}, {"Retry-After": arg})
            else:
                self._json(h, 200, {"items": []})
        elif mode == "json":
            self._send(h, 200, arg.encode())
        else:
            raise ValueError(f"unknown mode {self.mode!r}")

    def _head(self, h, status: int, headers: dict) -> None:
        h.send_response(status)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            h.send_header(k, v)
        h.end_headers()

    def _send(self, h, status: int, body: bytes, headers: dict | None = None) -> None:
        self._head(h, status, {"Content-Length": str(len(body)), **(headers or {})})
        h.wfile.write(body)

    def _json(self, h, status: int, doc: dict, headers: dict | None = None) -> None:
        self._send(h, status, json.dumps(doc).encode(), headers)


if __name__ == "__main__":  # bench/bad_inputs.py: serve MODE until standard input closes
    import sys
    import tempfile
    from pathlib import Path

    if sys.argv[1] == "gzip-bomb":
        gzip_bomb()  # built before the client starts timing
    with HostileApi(sys.argv[1]) as served, tempfile.TemporaryDirectory() as folder:
        print(served.kubeconfig(Path(folder) / "kubeconfig"), flush=True)
        sys.stdin.read()
