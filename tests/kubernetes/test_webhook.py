"""The admission webhook (deploy/webhook/): its certificates against the fake API server
(created, renewed on a fake clock, the caBundle patched, replicas that race), and its reviews
over TLS: every pod the policy's CEL is evaluated on gets the policy's decision and patch; a
malformed review, an oversized body, a pod outside a managed namespace and a silent peer each
get the contract's answer; and `gpu-policy controller --webhook` serves it."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml

from gpu_policy.controller import certificates
from gpu_policy.controller.webhook import Webhook
from gpu_policy.controller.webhook_tls import TlsKeeper, WebhookSettings
from gpu_policy.errors import GpuPolicyError
from gpu_policy.kubernetes.names import ADMISSION_GATE, WEBHOOK_CONFIGURATION, WEBHOOK_TLS_SECRET
from gpu_policy.kubernetes.transport.models import to_json, to_model
from gpu_policy.kubernetes.transport.webhook import WebhookClient
from tests.kubernetes.admission_cases import DEPLOY, PODS, pod, policy_gates, policy_matches
from tests.kubernetes.fake.patch import json_patch

DAY = 86400.0
T0 = 1_800_000_000.0
HOST = "gpu-policy-webhook.gpu-policy.svc"
DEADLINE_S = 60  # how long a test waits for what should come at once (never a measure)


def serve_webhook_objects(api) -> None:
    """What deploy/webhook/ creates: the empty Secret and the configuration (no caBundle yet)."""
    api.add_resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                     "MutatingWebhookConfiguration", False)
    for path in (DEPLOY / "webhook" / "secret.yaml", DEPLOY / "webhook" / "serving" / "configuration.yaml"):
        api.put(yaml.safe_load(path.read_text()))


def secret(api) -> dict[str, bytes]:
    data = api.get("secrets", WEBHOOK_TLS_SECRET, "gpu-policy")["data"]
    return {k: base64.b64decode(v) for k, v in data.items()}


def ca_bundle(api) -> bytes:
    config = api.get("mutatingwebhookconfigurations", WEBHOOK_CONFIGURATION, group="admissionregistration.k8s.io")
    return base64.b64decode(config["webhooks"][0]["clientConfig"].get("caBundle", ""))


def writes(api) -> list[tuple[str, str]]:
    return [(r.method, r.resource) for r in api.requests if r.method != "GET"]


class Wall:
    """The keeper's injected wall clock."""

    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def keeper(api, cluster):
    serve_webhook_objects(api)
    made = []

    def make(wall: Wall, **settings) -> TlsKeeper:
        k8s = cluster()
        client = WebhookClient(k8s.api_client, k8s.url, k8s.settings, sleep=k8s.clocks.sleep,
                               monotonic=k8s.clocks.monotonic)
        made.append(TlsKeeper(client, "gpu-policy", WebhookSettings(**settings), wall))
        return made[-1]

    return make


def at(t: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc)


# -- certificates ------------------------------------------------------------------------------
def test_the_certificate_is_created_and_its_ca_written_into_the_ca_bundle(api, keeper):
    wall = Wall()
    pair = keeper(wall).refresh()
    data = secret(api)
    assert pair is not None and (pair.cert_pem, pair.key_pem) == (data["tls.crt"], data["tls.key"])
    assert certificates.serves_until(data["tls.crt"], data["tls.key"], HOST, data["ca.crt"], at(T0)) == \
           at(T0 + 90 * DAY)
    assert ca_bundle(api) == data["ca.crt"] and len(certificates.certificates(data["ca.crt"])) == 1
    assert writes(api) == [("PUT", "/secrets"), ("PATCH", "admissionregistration.k8s.io/mutatingwebhookconfigurations")]


def test_it_is_renewed_before_expiry_and_both_cas_stay_trusted(api, keeper):
    wall = Wall()
    tls = keeper(wall)
    first = tls.refresh()
    api.reset_log()
    wall.now = T0 + 59 * DAY  # 31 days left: not yet due
    assert tls.refresh() == first and writes(api) == []
    wall.now = T0 + 61 * DAY  # 29 days left: renewed
    second = tls.refresh()
    assert second.cert_pem != first.cert_pem and second.not_after == at(wall.now + 90 * DAY)
    cas = certificates.certificates(secret(api)["ca.crt"])
    assert len(cas) == 2 and ca_bundle(api) == secret(api)["ca.crt"]  # the old CA too: replicas not reloaded yet
    wall.now = T0 + 122 * DAY  # the second is due; the first CA expired at day 90: it leaves both bundles
    tls.refresh()
    assert len(certificates.certificates(secret(api)["ca.crt"])) == 2
    assert certificates.certificates(secret(api)["ca.crt"])[1] == cas[0]
    assert ca_bundle(api) == secret(api)["ca.crt"]


def test_a_replica_that_lost_the_race_takes_the_winner_s_pair(api, keeper):
    wall = Wall()
    first, second = keeper(wall), keeper(wall)
    api.inject(409, method="PUT", path=r".*/secrets/.*")  # the other replica wrote first (here: nobody)
    assert first.refresh() is None  # it read the Secret back, found nothing servable: tries again later
    pair = second.refresh()
    assert first.refresh() == pair
    assert [w for w in writes(api) if w[1] == "/secrets"] == [("PUT", "/secrets")] * 2  # the refused one and one


def test_a_ca_the_bundle_trusts_stays_until_it_expires(api, keeper):
    """The caBundle is patched to the union of what it trusts and the Secret's CAs, so a replica
    with an older view can never take a newer CA out."""
    other = certificates.issue(["x"], at(T0), datetime.timedelta(days=10)).ca_pem
    config = api.get("mutatingwebhookconfigurations", WEBHOOK_CONFIGURATION, group="admissionregistration.k8s.io")
    config["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(other).decode()
    api.put(config)
    wall = Wall()
    keeper(wall).refresh()
    assert certificates.certificates(ca_bundle(api)) == certificates.certificates(secret(api)["ca.crt"] + other)
    wall.now = T0 + 61 * DAY
    keeper(wall).refresh()
    assert other not in ca_bundle(api)


def test_a_bundle_changed_meanwhile_is_not_overwritten(api, keeper):
    api.inject(422, method="PATCH", path=r".*/mutatingwebhookconfigurations/.*")  # its resourceVersion test failed
    tls = keeper(Wall())
    assert tls.refresh() is None  # not served before the API server trusts its CA
    assert tls.refresh() is not None and ca_bundle(api) == secret(api)["ca.crt"]


def test_with_cert_manager_the_secret_is_only_read(api, keeper):
    issued = certificates.issue([HOST], at(T0), datetime.timedelta(days=90))
    stored = api.get("secrets", WEBHOOK_TLS_SECRET, "gpu-policy")
    stored["data"] = {k: base64.b64encode(v).decode() for k, v in
                      (("tls.crt", issued.cert_pem), ("tls.key", issued.key_pem), ("ca.crt", issued.ca_pem))}
    api.put(stored)
    api.reset_log()
    wall = Wall(T0 + 80 * DAY)  # due for renewal, were it ours: cert-manager's to renew
    assert keeper(wall, self_signed=False).refresh().cert_pem == issued.cert_pem
    assert writes(api) == [] and ca_bundle(api) == b""


def test_a_missing_secret_or_configuration_is_named(api, keeper):
    tls = keeper(Wall())
    api.delete("secrets", WEBHOOK_TLS_SECRET, "gpu-policy")
    with pytest.raises(GpuPolicyError, match=r"Secret gpu-policy/gpu-policy-webhook-tls does not exist: "
                                             r"apply deploy/webhook/"):
        tls.refresh()
    serve_webhook_objects(api)
    api.delete("mutatingwebhookconfigurations", WEBHOOK_CONFIGURATION, group="admissionregistration.k8s.io")
    with pytest.raises(GpuPolicyError, match=r"MutatingWebhookConfiguration gpu-policy-admission does not exist"):
        tls.refresh()


# -- reviews over TLS ----------------------------------------------------------------------------
MANAGED = {("", "ml"): {"metadata": {"name": "ml", "labels": {"gpu-policy.io/managed": "true"}}},
           ("", "free"): {"metadata": {"name": "free"}}}


@pytest.fixture
def served(api, keeper):
    """A webhook on 127.0.0.1 serving the pair its keeper made, and the namespaces it knows."""
    namespaces = {"known": dict(MANAGED)}
    tls = keeper(Wall(time.time()), port=0, check_every_s=3600, request_timeout_s=2)  # a TLS client checks real time
    hook = Webhook(tls, tls.settings, lambda: namespaces["known"], host="127.0.0.1")
    port = hook.start()
    yield hook, port, namespaces, ca_bundle(api)
    hook.shutdown()


def post(port: int, ca: bytes, body: bytes, headers: dict | None = None) -> tuple[int, bytes]:
    """POST /mutate-pods as the API server does: TLS verified against the caBundle, for the Service's name."""
    context = ssl.create_default_context(cadata=ca.decode())
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as raw:
        with context.wrap_socket(raw, server_hostname=HOST) as tls:
            head = {"Host": HOST, "Content-Type": "application/json", "Content-Length": str(len(body)),
                    **(headers or {})}
            tls.sendall(b"POST /mutate-pods?timeout=5s HTTP/1.1\r\n" +
                        "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n" + body)
            answer = http.client.HTTPResponse(tls)
            answer.begin()
            return answer.status, answer.read()


def review(obj, namespace: str = "ml", uid: str = "u-1", operation: str = "CREATE") -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": namespace,
        "operation": operation, "object": obj}}).encode()


def answered(port: int, ca: bytes, body: bytes) -> dict:
    status, text = post(port, ca, body)
    assert status == 200, text
    return json.loads(text)["response"]


@pytest.mark.parametrize("case", PODS)
def test_every_pod_the_policy_is_evaluated_on_gets_its_decision_and_patch(case, served):
    """The pod as the `kubernetes` client's V1Pod writes it: in a managed namespace, patched
    exactly when the policy's CEL matches it, into the gates the policy's apply configuration
    gives; elsewhere never touched."""
    pytest.importorskip("celpy")
    _, port, _, ca = served
    obj = to_json(to_model(pod(case), "V1Pod"))
    response = answered(port, ca, review(obj))
    assert response["uid"] == "u-1" and response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    gated = json_patch(obj, patch)["spec"].get("schedulingGates") or []
    if all(policy_matches(obj)):
        assert gated == policy_gates(obj)
        assert response.get("patchType", "JSONPatch") == "JSONPatch"
    else:
        assert not patch and ADMISSION_GATE not in [g["name"] for g in gated]
    assert "patch" not in answered(port, ca, review(obj, namespace="free"))


@pytest.mark.parametrize("body, problem", [
    (b"{not json", "the AdmissionReview is not JSON gpu-policy can read"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).encode(),
     "the body must be an admission.k8s.io/v1 AdmissionReview"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}).encode(),
     "request.uid: must be the review's uid"),
    (b"[" * 10_000 + b"]" * 10_000, "nests deeper than 64 levels"),
])
def test_a_review_without_a_uid_to_answer_is_refused_with_a_message(body, problem, served):
    _, port, _, ca = served
    status, text = post(port, ca, body)
    assert status == 400 and problem in text.decode()


@pytest.mark.parametrize("obj, problem", [
    ({"metadata": {"name": "p"}, "spec": {"containers": "c"}}, "request.object: spec.containers: must be a list"),
    ({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {
        "nvidia.com/gpu": True}}}]}}, "request.object: spec.containers[0].resources.limits.nvidia.com/gpu: "
                                      "must be a quantity"),
    ({"metadata": {"name": "p"}, "spec": {"containers": [{"image": "x"}]}}, "request.object: not a V1Pod"),
    ([1, 2], "request.object: must be an object"),
])
def test_a_pod_that_cannot_be_read_is_refused_never_let_through(obj, problem, served):
    _, port, _, ca = served
    response = answered(port, ca, review(obj))
    assert response["allowed"] is False and "patch" not in response
    assert response["status"]["code"] == 400 and problem in response["status"]["message"]


def test_another_kind_is_refused_and_another_operation_let_through(served):
    _, port, _, ca = served
    body = json.loads(review(pod("gpu request")))
    body["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    refused = answered(port, ca, json.dumps(body).encode())
    assert refused["allowed"] is False and "request.kind: must be" in refused["status"]["message"]
    updated = answered(port, ca, review(pod("gpu request"), operation="UPDATE"))  # a gate is set at CREATE only
    assert updated["allowed"] is True and "patch" not in updated


def test_an_oversized_body_is_refused_unread(served):
    hook, port, _, ca = served
    status, text = post(port, ca, b"", headers={"Content-Length": str(3 * 1024 * 1024 + 1)})
    assert status == 413 and "above the 3,145,728-byte limit; refused unread" in text.decode()
    assert hook.reviews.labels("refused")._value.get() == 1


def test_a_pod_outside_a_managed_namespace_is_left_alone(served):
    hook, port, namespaces, ca = served
    for namespace in ("free", "unknown-to-the-cache"):
        response = answered(port, ca, review(pod("gpu request", namespace), namespace=namespace))
        assert response == {"uid": "u-1", "allowed": True}
    namespaces["known"] = None  # the cache has not listed namespaces yet: not ready, and nothing let through
    assert not hook.ready()
    response = answered(port, ca, review(pod("gpu request")))
    assert response["allowed"] is False and response["status"]["code"] == 503


def test_a_dripping_peer_is_cut_off_at_the_deadline(served):
    """A request that trickles in a byte every 0.25 s (each read well within the socket's
    timeout, the whole never) is closed at the connection's deadline (`request_timeout_s`,
    2 s here), long before its 200 bytes would have ended."""
    _, port, _, ca = served
    context = ssl.create_default_context(cadata=ca.decode())
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as raw:
        with context.wrap_socket(raw, server_hostname=HOST) as tls:
            assert _drip_until_closed(tls, b"POST /mutate-pods HTTP/1.1\r\nX-Pad: " + b"a" * 200)
    assert answered(port, ca, review(pod("gpu request")))["allowed"] is True  # and it serves on


def _drip_until_closed(tls: ssl.SSLSocket, data: bytes) -> bool:
    """Send `data` a byte every 0.25 s; True as soon as the peer has closed the connection."""
    for byte in data:
        try:
            tls.sendall(bytes([byte]))
        except OSError:
            return True
        select.select([tls], [], [], 0.25)
        tls.setblocking(False)
        try:
            if tls.recv(1) == b"":
                return True
        except ssl.SSLWantReadError:  # nothing from the webhook yet (a TLS session ticket is not data)
            pass
        except OSError:
            return True
        finally:
            tls.settimeout(DEADLINE_S)
    return False


def test_readiness_waits_for_the_certificate(api, keeper):
    api.delete("secrets", WEBHOOK_TLS_SECRET, "gpu-policy")
    tls = keeper(Wall(), port=0, check_every_s=3600, retry_s=3600)
    hook = Webhook(tls, tls.settings, lambda: dict(MANAGED), host="127.0.0.1")
    try:
        hook.start()
        assert not hook.ready()
        serve_webhook_objects(api)
        assert hook.refresh() and hook.ready()
    finally:
        hook.shutdown()


# -- the command ---------------------------------------------------------------------------------
def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_controller_serves_the_webhook_and_is_ready_once_it_has_its_certificate(api, kubeconfig):
    serve_webhook_objects(api)
    api.put({"kind": "Namespace", "metadata": {"name": "ml", "labels": {"gpu-policy.io/managed": "true"}}})
    api.put({"kind": "Node", "metadata": {"name": "n1", "labels": {}},
             "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen([sys.executable, "-m", "gpu_policy.cli", "controller", "--cluster", "k8s://",
                                "--kubeconfig", kubeconfig, "--metrics-port", "0", "--webhook", "--webhook-port", "0"],
                               env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not lines or "metrics on port" not in lines[-1] and lines[-1]:  # the log before it: the certificate
            lines.append(process.stderr.readline())
        (webhook,) = [line for line in lines if "admission webhook on port" in line]
        webhook_port = int(webhook.split(" on port ")[1].split()[0])
        metrics_port = int(lines[-1].rsplit(" ", 1)[1])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and _readyz(metrics_port) != 200:
            time.sleep(0.1)
        assert _readyz(metrics_port) == 200
        response = answered(webhook_port, ca_bundle(api), review(pod("gpu request")))
        assert json.loads(base64.b64decode(response["patch"])) == [
            {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": ADMISSION_GATE}]}]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
