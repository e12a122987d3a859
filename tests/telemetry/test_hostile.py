"""A Prometheus that dies or lies in each way of issue 17 never stops a plan; TLS is
verified by default; credentials never show; exporter labels cannot forge series."""

import json
import shutil
import ssl
import subprocess
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from gpu_policy import parse_scenario
from gpu_policy.actions.cycle import plan_with_telemetry
from gpu_policy.presentation.render import telemetry_table
from gpu_policy.telemetry import (
    GpuKey, PrometheusDcgmSource, SimulatedDcgmSource, TelemetrySettings, TelemetryUnavailable, cluster_signals)
from gpu_policy.telemetry.exporter import render_metrics
from gpu_policy.telemetry.http import redact_url
from tests.serving import serve_in_thread
from tests.telemetry.conftest import NODE_A

FAST = TelemetrySettings(timeout_s=0.5, retries=1, backoff_s=0.01, total_timeout_s=5)


def _series(query: str, now: float, value: str) -> dict:
    labels = {"__name__": query, "Hostname": "node-a", "gpu": "0", "modelName": "A100"}
    return {"metric": labels, "values": [[now - 30, value], [now, value]]}


class Hostile:
    """An HTTP(S) server on 127.0.0.1 that answers in one hostile way; records what it was sent."""

    def __init__(self, mode: str, tls: tuple[str, str] | None = None):
        self.headers: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                fake.headers.append(dict(self.headers))
                query = parse_qs(urlsplit(self.path).query).get("query", [""])[0]
                try:
                    self.answer(query)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should

            def send(self, body: bytes, length: int | None = None):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)

            def answer(self, query: str):
                now = time.time()
                if mode == "nested":
                    self.send(b'{"status": "success", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
                elif mode == "trickle":  # one byte every 0.2 s: each read is quick, the whole never ends in time
                    self.send_response(200)
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    for _ in range(1000):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.2)
                elif mode == "huge":
                    self.send(b" " * 4096)
                elif mode == "non-finite":
                    if query.startswith("timestamp("):
                        result = [{"metric": _series(query, now, "")["metric"], "value": [now, str(now)]}]
                    elif query in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"):
                        result = [{**_series(query, now, "NaN"), "values": [[now - 60, "NaN"], [now - 30, "+Inf"],
                                                                          [now, "-Inf"]]}]
                    else:
                        result = [{"metric": _series(query, now, "")["metric"], "value": [now, "NaN"]}]
                    self.send(json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                                         "result": result}}).encode())
                else:
                    raise AssertionError(mode)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile(request):
    servers = []

    def start(mode, **kwargs):
        servers.append(Hostile(mode, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("mode, problem", [
    ("nested", "sent malformed data (InputError: answer: line 1: nests deeper than 32 levels)"),
    ("trickle", "did not answer within 0.5 s"),
])
def test_a_dying_prometheus_never_stops_a_plan(mode, problem, hostile):
    server = hostile(mode)
    began = time.monotonic()
    result = plan_with_telemetry(parse_scenario(NODE_A), PrometheusDcgmSource(server.url, FAST, sleep=lambda s: None),
                                 settings=FAST)
    assert time.monotonic() - began < 60  # not a timing test: only that it ended at all
    assert result.telemetry is None and len(result.warnings) == 1
    assert problem in result.warnings[0] and "after 2 attempts" in result.warnings[0]
    json.dumps(result.to_dict(), allow_nan=False)


def test_an_answer_above_the_size_limit_is_refused(hostile):
    server = hostile("huge")
    settings = TelemetrySettings(timeout_s=2, retries=0, max_answer_bytes=1000)
    with pytest.raises(TelemetryUnavailable, match=r"sent an answer of 4,096 bytes, above the 1,000-byte limit"):
        PrometheusDcgmSource(server.url, settings).collect()


def test_the_whole_collection_has_one_deadline(hostile):
    """Every request may take 0.5 s; the collection as a whole at most `total_timeout_s`."""
    server = hostile("trickle")
    now = [0.0]

    def clock():
        now[0] += 0.4  # each look at the clock: another 0.4 s gone
        return now[0]

    settings = TelemetrySettings(timeout_s=0.5, retries=5, backoff_s=0, total_timeout_s=1.0)
    with pytest.raises(TelemetryUnavailable, match=r"did not finish within the 1 s of a collection"):
        PrometheusDcgmSource(server.url, settings, sleep=lambda s: None, clock=clock).collect()


def test_non_finite_values_count_as_missing(hostile):
    server = hostile("non-finite")
    source = PrometheusDcgmSource(server.url, FAST)
    reading = source.collect().gpus[GpuKey("node-a", 0)]
    assert reading.utilization == [] and reading.xids == []
    assert reading.memory_used_mib is None and reading.power_w is None and reading.temperature_c is None
    result = plan_with_telemetry(parse_scenario(NODE_A), source, settings=FAST)
    text = json.dumps(result.to_dict(), allow_nan=False)  # strict JSON: no NaN, no Infinity
    assert "NaN" not in text and "Infinity" not in text


def test_credentials_are_sent_but_never_shown(hostile):
    server = hostile("nested")
    url = server.url.replace("http://", "http://alice:s3cret@") + "/?token=abc"
    result = plan_with_telemetry(parse_scenario(NODE_A), PrometheusDcgmSource(url, FAST, sleep=lambda s: None),
                                 settings=FAST)
    assert server.headers[0]["Authorization"] == "Basic YWxpY2U6czNjcmV0"  # alice:s3cret
    text = json.dumps(result.to_dict())
    assert "s3cret" not in text and "abc" not in text and "alice:***@127.0.0.1" in text


def test_redact_url():
    assert redact_url("https://u:p@h:9090/x?a=1&b=2") == "https://u:***@h:9090/x?a=***&b=***"
    assert redact_url("http://h:9090") == "http://h:9090"
    assert redact_url("http://[::1:9090") == "http://***"


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed: it makes the test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def test_tls_is_verified_by_default(hostile, self_signed):
    server = hostile("non-finite", tls=self_signed)
    with pytest.raises(TelemetryUnavailable, match=r"has a TLS certificate that does not verify \(self.signed "
                                                   r"certificate\); --prometheus-insecure skips the check"):
        PrometheusDcgmSource(server.url, FAST).collect()
    insecure = TelemetrySettings(timeout_s=2, retries=0, verify_tls=False)
    assert GpuKey("node-a", 0) in PrometheusDcgmSource(server.url, insecure).collect().gpus


def test_prometheus_insecure_warns(capsys, tmp_path):
    from gpu_policy.cli import main

    path = tmp_path / "s.json"
    path.write_text(json.dumps(NODE_A))
    assert main(["telemetry", "--scenario", str(path), "--prometheus-insecure"]) == 0
    assert "warning: --prometheus-insecure: the Prometheus TLS certificate is not verified" in capsys.readouterr().err


def test_exporter_label_values_cannot_forge_series():
    evil = 'n"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu="9",Hostname="forged'
    scenario = parse_scenario({"nodes": [{"name": evil, "gpus": 1}], "queues": [{"name": "q"}], "jobs": []})
    text = render_metrics(scenario)
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(samples) == 7  # one per series for the one GPU: nothing forged
    assert all('Hostname="n\\"} 1\\nDCGM_FI_DEV_GPU_UTIL{gpu=\\"9\\",Hostname=\\"forged"' in s for s in samples)
    from prometheus_client.parser import text_string_to_metric_families

    parsed = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert len(parsed) == 7 and {s.labels["Hostname"] for s in parsed} == {evil}  # read back as it was


def test_the_table_never_says_ok_beside_xid_79():
    scenario = parse_scenario(NODE_A)
    signals = cluster_signals(SimulatedDcgmSource(scenario).collect(), scenario, TelemetrySettings())
    row = next(line for line in telemetry_table(signals, scenario).splitlines() if "XID 79" in line)
    assert " unhealthy " in row and " ok " not in row


def test_an_unreachable_prometheus_never_stops_a_plan():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once the socket closes
    result = plan_with_telemetry(parse_scenario(NODE_A), PrometheusDcgmSource(f"http://127.0.0.1:{port}", FAST,
                                                                              sleep=lambda s: None), settings=FAST)
    assert result.telemetry is None and "is unreachable (connection refused)" in result.warnings[0]


def test_the_command_line_plans_on_with_a_warning(hostile, tmp_path, capsys):
    """`gpu-policy plan --prometheus URL` against a server sending 100,000-deep JSON: exit 0, a plan."""
    from gpu_policy.cli import main

    server = hostile("nested")
    path = tmp_path / "s.json"
    path.write_text(json.dumps(NODE_A))
    assert main(["plan", str(path), "--prometheus", server.url, "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["telemetry"] is None
    assert plan["warnings"][0].startswith(f"planned without telemetry: Prometheus at {server.url} sent malformed data")
