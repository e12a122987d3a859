"""A PrometheusConnect of the user's own against the hostile Prometheus of test_hostile.py:
the bounds that hold through it give the same one-line answers as gpu-policy's own client
(depth, non-finite values, TLS verified, secrets never shown, unreachable, HTTP errors), and
the one that cannot hold is shown for what it is (the answer's size: read whole, then judged).
docs/telemetry.md ("Your own PrometheusConnect") has the measurements, the slow-drip case
among them (bench/prometheus_connect.py): the reason gpu-policy's own client stays the default."""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from gpu_policy import parse_scenario
from gpu_policy.actions.cycle import plan_with_telemetry
from gpu_policy.telemetry import GpuKey, PrometheusDcgmSource, TelemetrySettings, TelemetryUnavailable
from tests.serving import serve_in_thread
from tests.telemetry.conftest import NODE_A
from tests.telemetry.test_hostile import FAST, hostile, self_signed  # noqa: F401 (fixtures)

NO_RETRY = Retry(total=0)  # the client's own retries off: ours (FAST: 2 attempts) are what is counted


def own(url: str, **kwargs) -> PrometheusConnect:
    return PrometheusConnect(url=url, retry=NO_RETRY, **kwargs)


def test_json_nested_too_deep_is_malformed_data_not_a_crash(hostile):
    server = hostile("nested")
    result = plan_with_telemetry(parse_scenario(NODE_A), PrometheusDcgmSource(own(server.url), FAST,
                                                                              sleep=lambda s: None), settings=FAST)
    assert result.telemetry is None and len(result.warnings) == 1
    assert "sent malformed data (JSON nested too deep to read)" in result.warnings[0]
    assert "after 2 attempts" in result.warnings[0]


def test_non_finite_values_count_as_missing(hostile):
    server = hostile("non-finite")
    reading = PrometheusDcgmSource(own(server.url), FAST).collect().gpus[GpuKey("node-a", 0)]
    assert reading.utilization == [] and reading.xids == []
    assert reading.memory_used_mib is None and reading.power_w is None and reading.temperature_c is None


def test_an_answer_above_the_size_limit_is_read_whole(hostile):
    """`max_answer_bytes` cannot hold through the client: it reads the 4,096 bytes and parses
    them (here they are not JSON), where gpu-policy's own client refuses them unread."""
    server = hostile("huge")
    settings = TelemetrySettings(timeout_s=2, retries=0, max_answer_bytes=1000)
    with pytest.raises(TelemetryUnavailable, match=r"sent malformed data \(JSONDecodeError\)"):
        PrometheusDcgmSource(own(server.url), settings).collect()


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
def test_tls_is_verified_by_the_client_s_session(hostile, self_signed):
    server = hostile("non-finite", tls=self_signed)
    with pytest.raises(TelemetryUnavailable, match=r"has a TLS certificate that does not verify \(the "
                                                   r"PrometheusConnect's session decides what is trusted\)"):
        PrometheusDcgmSource(own(server.url), FAST).collect()
    assert GpuKey("node-a", 0) in PrometheusDcgmSource(own(server.url, disable_ssl=True), FAST).collect().gpus


def test_credentials_are_sent_but_never_shown(hostile):
    server = hostile("nested")
    client = own(server.url.replace("http://", "http://alice:s3cret@") + "/?token=abc",
                 headers={"X-Api-Key": "t0ken"})
    result = plan_with_telemetry(parse_scenario(NODE_A), PrometheusDcgmSource(client, FAST, sleep=lambda s: None),
                                 settings=FAST)
    assert server.headers[0]["Authorization"] == "Basic YWxpY2U6czNjcmV0"  # alice:s3cret
    assert server.headers[0]["X-Api-Key"] == "t0ken"
    text = json.dumps(result.to_dict())
    assert "s3cret" not in text and "abc" not in text and "t0ken" not in text and "alice:***@127.0.0.1" in text


def test_an_unreachable_prometheus_is_said_as_by_the_own_client():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = plan_with_telemetry(parse_scenario(NODE_A), PrometheusDcgmSource(own(f"http://127.0.0.1:{port}"), FAST,
                                                                              sleep=lambda s: None), settings=FAST)
    assert result.telemetry is None and "is unreachable (connection refused)" in result.warnings[0]


@pytest.fixture
def failing():
    """A Prometheus that answers every query with one status."""
    servers = []

    def start(status: int):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = b'{"status": "error", "errorType": "bad_data", "error": "secret-looking text"}'
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        servers.append(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        serve_in_thread(servers[-1])
        return f"http://127.0.0.1:{servers[-1].server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_http_errors_are_said_and_retried_as_by_the_own_client(failing):
    """A 400 fails at once, a 503 is retried by us (the client's retries off) or, with the
    client's own retries on, ends when they run out; the server's text is never repeated."""
    with pytest.raises(TelemetryUnavailable, match=r"answered HTTP 400 for .* after 1 attempt$"):
        PrometheusDcgmSource(own(failing(400)), FAST, sleep=lambda s: None).collect()
    with pytest.raises(TelemetryUnavailable, match=r"answered HTTP 503 for .* after 2 attempts$"):
        PrometheusDcgmSource(own(failing(503)), FAST, sleep=lambda s: None).collect()
    retrying = PrometheusConnect(url=failing(503), retry=Retry(total=1, backoff_factor=0,
                                                               status_forcelist=[503]))
    with pytest.raises(TelemetryUnavailable, match=r"answered an error status until the PrometheusConnect's own "
                                                   r"retries ran out .* after 1 attempt$") as raised:
        PrometheusDcgmSource(retrying, FAST, sleep=lambda s: None).collect()
    assert "secret-looking" not in str(raised.value)


def test_anything_else_is_refused_in_one_line():
    with pytest.raises(Exception, match=r"prometheus: must be a URL or a prometheus_api_client.PrometheusConnect, "
                                        r"got dict"):
        PrometheusDcgmSource({"url": "http://x"})
