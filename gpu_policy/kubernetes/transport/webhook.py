"""The admission webhook's own requests: the Secret of its certificates and the caBundle of
its MutatingWebhookConfiguration (deploy/webhook/; docs/kubernetes.md, "The admission webhook").

Only deploy/webhook/ grants them, each by name (`resourceNames`), so they are declared apart
from the controller's other permissions, in `WEBHOOK_PERMISSIONS`. Every request is bounded,
retried and worded as the controller's others (`sender.Sender`).
"""

from __future__ import annotations

from gpu_policy.kubernetes.names import WEBHOOK_CONFIGURATION, WEBHOOK_TLS_SECRET
from gpu_policy.kubernetes.transport.answers import Answer
from gpu_policy.kubernetes.transport.permissions import Permission, needs
from gpu_policy.kubernetes.transport.sender import Sender

#: what the webhook's certificates need, granted by deploy/webhook/ only (by resourceNames)
WEBHOOK_PERMISSIONS: set[Permission] = set()


class WebhookClient(Sender):
    """Reads and writes the Secret `gpu-policy-webhook-tls` in gpu-policy's namespace and
    patches the MutatingWebhookConfiguration `gpu-policy-admission`."""

    def __init__(self, api_client, *args, **kwargs):
        """As a Sender: the ApiClient, where it sends, the settings, and its clocks."""
        from kubernetes import client

        super().__init__(api_client, *args, **kwargs)
        self._core = client.CoreV1Api(api_client)
        self._admission = client.AdmissionregistrationV1Api(api_client)

    @needs("get", "secrets", own_namespace=True, registry=WEBHOOK_PERMISSIONS)
    def read_tls_secret(self) -> dict | None:
        """The Secret as it is now; None when it does not exist (deploy/webhook/ creates it)."""
        ns = self.settings.namespace
        answer = self._request(f"get Secret {ns}/{WEBHOOK_TLS_SECRET}", lambda **kw: self._core.read_namespaced_secret(
            name=WEBHOOK_TLS_SECRET, namespace=ns, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @needs("update", "secrets", own_namespace=True, registry=WEBHOOK_PERMISSIONS)
    def replace_tls_secret(self, secret: dict) -> dict | None:
        """Write `secret` (as read, with new data) if it is still at the resourceVersion it
        carries; None when another replica wrote it first (409) or it is gone (404)."""
        ns = self.settings.namespace
        answer = self._request(f"update Secret {ns}/{WEBHOOK_TLS_SECRET}",
                               lambda **kw: self._core.replace_namespaced_secret(
                                   name=WEBHOOK_TLS_SECRET, namespace=ns, body=secret, **kw), accept={404, 409})
        return answer.body if answer.status < 300 else None

    @needs("get", "mutatingwebhookconfigurations", group="admissionregistration.k8s.io",
           registry=WEBHOOK_PERMISSIONS)
    def read_webhook_configuration(self) -> dict | None:
        """The MutatingWebhookConfiguration; None when it does not exist."""
        answer = self._request(f"get MutatingWebhookConfiguration {WEBHOOK_CONFIGURATION}",
                               lambda **kw: self._admission.read_mutating_webhook_configuration(
                                   name=WEBHOOK_CONFIGURATION, **kw), accept={404})
        return None if answer.status == 404 else answer.body

    @needs("patch", "mutatingwebhookconfigurations", group="admissionregistration.k8s.io",
           registry=WEBHOOK_PERMISSIONS)
    def patch_webhook_configuration(self, operations: list[dict]) -> Answer:
        """A JSON patch (RFC 6902) of the configuration: 200 done; 404 gone; 409 or 422 a
        `test` failed (it changed since it was read)."""
        return self._request(f"patch MutatingWebhookConfiguration {WEBHOOK_CONFIGURATION}",
                             lambda **kw: self._admission.patch_mutating_webhook_configuration(
                                 name=WEBHOOK_CONFIGURATION, body=operations, **kw), accept={404, 409, 422})
