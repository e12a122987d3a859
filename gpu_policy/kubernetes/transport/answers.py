"""What the API server answered, as gpu-policy words it: an `Answer` a caller handles itself,
what the requests cost (`ApiStats`), and the library's refusals and stream events read into
gpu-policy's own terms, so that no library error leaves the transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_policy.errors import ClusterUnavailable
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.transport.bounded import BodyRefused, parse_json, retry_after


class WatchExpired(ClusterUnavailable):
    """A WATCH answered 410 Gone: its resourceVersion is too old; relist that kind."""


@dataclass
class ApiStats:
    """What the calls cost: requests sent (retries included), objects listed, bytes read."""

    calls: int = 0
    objects: int = 0
    bytes: int = 0

    def since(self, before: ApiStats) -> ApiStats:
        return ApiStats(self.calls - before.calls, self.objects - before.objects, self.bytes - before.bytes)


@dataclass
class Answer:
    """An API answer a caller handles itself (e.g. 404, 409, 429 on an eviction)."""

    status: int
    body: dict = field(default_factory=dict)
    retry_after: float | None = None

    @property
    def message(self) -> str:
        return str(self.body.get("message", "")).replace("\n", " ")[:300]

    @property
    def admission_denied(self) -> bool:
        """A 403 from an admission webhook (its rule refused the object), not from RBAC."""
        return self.status == 403 and self.message.startswith("admission webhook")


def answer_of(e, settings: KubernetesSettings) -> Answer:
    """A refusal's status, body (its bounded bytes) and clamped Retry-After."""
    raw = e.body if isinstance(e.body, bytes) else (e.body or "").encode()
    try:
        body = parse_json(raw)
    except BodyRefused:
        body = {"message": raw[:300].decode("utf-8", "replace")}
    headers = e.headers or {}
    asked = retry_after(headers.get("Retry-After"), settings.retry_floor_s, settings.retry_ceiling_s)
    return Answer(e.status or 0, body if isinstance(body, dict) else {}, asked)


def watch_event(what: str, where: str, event: Any) -> tuple[str, dict]:
    """(type, object) of one watch event; an ERROR event is raised (410: WatchExpired)."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ClusterUnavailable(f"{where}: {what}: a watch event is not an object with a type")
    obj = event.get("object") if isinstance(event.get("object"), dict) else {}
    if event["type"] == "ERROR":
        code, message = obj.get("code"), str(obj.get("message") or "")[:300]
        if code == 410:
            raise WatchExpired(f"{where}: {what}: {message or '410 Gone'}")
        raise ClusterUnavailable(f"{where}: {what}: the watch ended with an error ({code}: {message})")
    return event["type"], obj


def cause(e: BaseException) -> str:
    """The root of a urllib3 error in a few words."""
    text = str(getattr(e, "reason", None) or e)
    for marker in ("Connection refused", "timed out", "Name or service not known", "No route to host",
                   "certificate verify failed"):
        if marker.lower() in text.lower():
            return marker.lower()
    return type(getattr(e, "reason", None) or e).__name__
