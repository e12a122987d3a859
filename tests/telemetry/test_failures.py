"""When monitoring fails: a typed one-line error after bounded retries, and the plan
goes on without telemetry, with a warning."""

import json
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpu_policy import parse_scenario
from gpu_policy.actions.cycle import plan_with_telemetry
from gpu_policy.telemetry import PrometheusDcgmSource, TelemetrySettings, TelemetryUnavailable
from tests.serving import serve_in_thread
from tests.telemetry.conftest import NODE_A

FAST = TelemetrySettings(timeout_s=0.3, retries=2, backoff_s=0.01)


class FakePrometheus:
    """An HTTP server on 127.0.0.1 that misbehaves in one way and counts requests."""

    def __init__(self, mode: str):
        self.requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                fake.requests += 1
                if mode == "slow":
                    time.sleep(1.0)
                status, body = {
                    "5xx": (503, b"overloaded"),
                    "404": (404, b"not found"),
                    "slow": (200, b"{}"),
                    "not-json": (200, b"<html>proxy error</html>"),
                    "wrong-shape": (200, json.dumps({"status": "success", "data": {"result": "oops"}}).encode()),
                    "no-labels": (200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
                        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL"}, "values": [[1, "5"]]}]}}).encode()),
                }[mode]
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


CASES = {
    "5xx": ("answered HTTP 503", 3),
    "404": ("answered HTTP 404", 1),  # a bad query will not get better: no retries
    "slow": ("did not answer within 0.3 s", 3),
    "not-json": ("sent malformed data (JSONDecodeError", 3),
    "wrong-shape": ("sent malformed data", 3),
    "no-labels": ("sent malformed data (a DCGM series without Hostname/hostname", 3),
}


@pytest.mark.parametrize("mode", sorted(CASES))
def test_each_failure(mode):
    fake = FakePrometheus(mode)
    try:
        waits = []
        source = PrometheusDcgmSource(fake.url, FAST, sleep=waits.append)
        with pytest.raises(TelemetryUnavailable) as info:
            source.collect()
        message, attempts = CASES[mode]
        text = str(info.value)
        assert "\n" not in text and text.startswith(f"Prometheus at {fake.url} ")
        assert message in text and f"after {attempts} attempt" in text
        assert fake.requests == attempts
        assert waits == [0.01, 0.02][: attempts - 1]  # backoff doubles
    finally:
        fake.close()


def test_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    source = PrometheusDcgmSource(f"http://127.0.0.1:{port}", FAST, sleep=lambda s: None)
    with pytest.raises(TelemetryUnavailable, match=r"is unreachable \(connection refused\) .* after 3 attempts"):
        source.collect()


@pytest.mark.parametrize("mode", ["5xx", "not-json"])
def test_plan_goes_on_without_telemetry(mode):
    fake = FakePrometheus(mode)
    try:
        result = plan_with_telemetry(parse_scenario(NODE_A), PrometheusDcgmSource(fake.url, FAST, sleep=lambda s: None))
    finally:
        fake.close()
    assert result.telemetry is None
    assert len(result.warnings) == 1 and result.warnings[0].startswith("planned without telemetry: Prometheus at")
    # allocation only: the newest job is the victim, as without telemetry
    assert {j.name: j.action for j in result.jobs}["busy-job"] == "preempt"
