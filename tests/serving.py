"""The tests' own HTTP servers, served from a daemon thread and stopped at once."""

import threading
from socketserver import BaseServer

#: How often `serve_forever` looks for `shutdown()`: the most a stop waits. The default, 0.5 s,
#: was paid by every test's teardown (a fake API server per test: minutes a suite).
STOP_POLL_S = 0.01


def serve_in_thread(server: BaseServer, name: str | None = None) -> None:
    """Serve `server` until `server.shutdown()`, which then returns within STOP_POLL_S."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": STOP_POLL_S}, name=name,
                     daemon=True).start()
