"""The webhook's TLS: the certificate pair kept in the Secret `gpu-policy-webhook-tls`, and the
CAs that the MutatingWebhookConfiguration's `caBundle` trusts (deploy/webhook/).

Every replica runs `TlsKeeper.refresh` at start and then every `check_every_s`; none needs
the Lease. Self-signed (the default), a replica that finds the Secret empty, or its
certificate due for renewal, issues a new pair (gpu_policy.controller.certificates) and
writes it only if the Secret is still as it read it, so when replicas race one pair wins
and the others take it. Before a replica serves a pair, the caBundle must trust its CA: the
bundle is patched to hold every CA still valid of the Secret's and its own (a union, so a
replica with an older view never takes a newer CA out), guarded by a `test` of the
configuration's resourceVersion. With certificates from elsewhere (cert-manager, the
overlay), the keeper only reads the Secret; cert-manager's CA injector writes the caBundle.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import logging
from dataclasses import dataclass
from typing import Callable

from gpu_policy.controller import certificates
from gpu_policy.errors import GpuPolicyError
from gpu_policy.kubernetes.names import WEBHOOK_CONFIGURATION, WEBHOOK_NAME, WEBHOOK_SERVICE, WEBHOOK_TLS_SECRET
from gpu_policy.kubernetes.transport.webhook import WebhookClient

log = logging.getLogger(__name__)

_DAY = 86400.0


@dataclass
class WebhookSettings:
    port: int = 9443
    """The HTTPS port of POST /mutate-pods (the Service's 443 targets it)."""
    self_signed: bool = True
    """Keep a self-signed CA and serving certificate in the Secret; False: another issuer
    (cert-manager) fills the Secret and the caBundle, and gpu-policy only reads them."""
    certificate_valid_s: float = 90 * _DAY
    """How long a new CA and serving certificate are valid (cert-manager's default, 90 days)."""
    renew_before_s: float = 30 * _DAY
    """A certificate is renewed this long before it expires (a third of its life, as
    cert-manager does), so a renewal that fails has weeks of retries before anything breaks."""
    check_every_s: float = 600.0
    """Each replica reads the Secret this often: a pair another replica renewed is served
    within it, and a renewal falls due at most this late."""
    retry_s: float = 10.0
    """After a failed check (no Secret yet, the API server away), the next check comes this soon."""
    request_timeout_s: float = 5.0
    """Seconds one connection may take from accepting it to the last byte of the answer, TLS
    handshake included: the API server gives up after the configuration's timeoutSeconds (5)."""


@dataclass(frozen=True)
class Pair:
    """A certificate and key to serve, and when the certificate expires."""

    cert_pem: bytes
    key_pem: bytes
    not_after: datetime.datetime


class TlsKeeper:
    """Keeps the Secret and the caBundle in order; `refresh()` gives the pair to serve."""

    def __init__(self, client: WebhookClient, namespace: str, settings: WebhookSettings,
                 wall: Callable[[], float]):
        self.client, self.settings, self.wall = client, settings, wall
        self.names = certificates.service_names(WEBHOOK_SERVICE, namespace)
        self.name = self.names[0]
        self.where = f"Secret {namespace}/{WEBHOOK_TLS_SECRET}"

    def now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.wall(), datetime.timezone.utc)

    def refresh(self) -> Pair | None:
        """The pair to serve now, the Secret renewed first when due (self-signed); None when
        there is none yet, or its CA is not in the caBundle yet. GpuPolicyError when the
        Secret or the configuration is missing, or the API server cannot be reached."""
        secret = self._read()
        pair = self._servable(secret, self.settings.renew_before_s if self.settings.self_signed else 0.0)
        if not self.settings.self_signed:
            return pair
        if pair is None:
            secret = self._renew(secret)
            pair = self._servable(secret, 0.0)
        if pair is None or not self._trusted(_field(secret, "ca.crt")):
            return None
        return pair

    def _read(self) -> dict:
        secret = self.client.read_tls_secret()
        if secret is None:
            raise GpuPolicyError(f"{self.where} does not exist: apply deploy/webhook/, which creates it empty")
        return secret

    def _servable(self, secret: dict, margin_s: float) -> Pair | None:
        """The Secret's pair when it is valid for at least `margin_s` more."""
        cert, key = _field(secret, "tls.crt"), _field(secret, "tls.key")
        until = certificates.serves_until(cert, key, self.name, _field(secret, "ca.crt"), self.now())
        if until is None or (until - self.now()).total_seconds() <= margin_s:
            return None
        return Pair(cert, key, until)

    def _renew(self, secret: dict) -> dict:
        """A new pair written into the Secret, or the Secret as another replica wrote it first."""
        now, s = self.now(), self.settings
        issued = certificates.issue(self.names, now, datetime.timedelta(seconds=s.certificate_valid_s))
        cas = certificates.bundle([issued.ca_pem, _field(secret, "ca.crt")], now)
        data = {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem, "ca.crt": cas}
        body = {**secret, "data": {**(secret.get("data") or {}),
                                   **{k: base64.b64encode(v).decode() for k, v in data.items()}}}
        written = self.client.replace_tls_secret(body)
        if written is None:
            log.info("%s: another replica renewed the certificate first; serving theirs", self.where)
            return self._read()
        log.info("%s: issued a certificate for %s, valid until %s", self.where, self.name,
                 (now + datetime.timedelta(seconds=s.certificate_valid_s)).isoformat(timespec="seconds"))
        return written

    def _trusted(self, cas: bytes) -> bool:
        """Whether the caBundle trusts every CA of `cas`, after adding them when it did not."""
        config = self.client.read_webhook_configuration()
        if config is None:
            raise GpuPolicyError(f"MutatingWebhookConfiguration {WEBHOOK_CONFIGURATION} does not exist: "
                                 "apply deploy/webhook/")
        hooks = config.get("webhooks") or []
        at = next((i for i, h in enumerate(hooks) if isinstance(h, dict) and h.get("name") == WEBHOOK_NAME), None)
        if at is None:
            raise GpuPolicyError(f"MutatingWebhookConfiguration {WEBHOOK_CONFIGURATION} has no webhook "
                                 f"{WEBHOOK_NAME}: apply deploy/webhook/")
        current = _decoded((hooks[at].get("clientConfig") or {}).get("caBundle"))
        wanted = certificates.bundle([cas, current], self.now())
        if wanted == current:
            return True
        answer = self.client.patch_webhook_configuration([
            {"op": "test", "path": "/metadata/resourceVersion", "value": (config.get("metadata") or {}).get(
                "resourceVersion")},
            {"op": "test", "path": f"/webhooks/{at}/name", "value": WEBHOOK_NAME},
            {"op": "add", "path": f"/webhooks/{at}/clientConfig/caBundle", "value": base64.b64encode(wanted).decode()}])
        if answer.status >= 300:
            log.info("MutatingWebhookConfiguration %s changed while its caBundle was written (%s); "
                     "trying again at the next check", WEBHOOK_CONFIGURATION, answer.status)
            return False
        log.info("MutatingWebhookConfiguration %s: caBundle now trusts %d CA(s)", WEBHOOK_CONFIGURATION,
                 len(certificates.certificates(wanted)))
        return True


def _decoded(text) -> bytes:
    """A base64 field's bytes; empty when absent or not base64."""
    if not isinstance(text, str):
        return b""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _field(secret: dict, key: str) -> bytes:
    return _decoded((secret.get("data") or {}).get(key))
