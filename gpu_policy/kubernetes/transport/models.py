"""The `kubernetes` client's models from JSON and back, without sending anything.

Client 37 and later generate pydantic models, read with the model's own `from_dict`; 30 to 36
read JSON with `ApiClient.deserialize`, which takes an answer object. One ApiClient, made on
first use, serves every thread: reading and writing keep no state in it."""

from __future__ import annotations

import json

_CLIENT: list = []


class _Body:
    """What `ApiClient.deserialize` reads: an answer's body, as text."""

    def __init__(self, obj):
        self.data = json.dumps(obj)


def _client():
    if not _CLIENT:
        from kubernetes.client import ApiClient

        _CLIENT.append(ApiClient())
    return _CLIENT[0]


def to_model(obj, model: str):
    """`obj` (JSON) as the client's model named `model`, e.g. "V1Pod". ValueError, in one line,
    when the client cannot read it: it raises ValueError (pydantic's ValidationError is one) for
    a required field missing or, from 37, a field of the wrong type, and TypeError or
    AttributeError for a field of the wrong kind deep inside (a number where a list belongs)."""
    from kubernetes import client

    kind = getattr(client, model)
    try:
        if hasattr(kind, "from_dict"):
            return kind.from_dict(obj)
        return _client().deserialize(_Body(obj), model)
    except (ValueError, TypeError, AttributeError) as e:
        text = " ".join(str(e).split())
        raise ValueError(f"not a {model} the kubernetes client can read ({type(e).__name__}: {text[:160]})") from None


def to_json(model) -> dict:
    """A model as the API's JSON (camelCase, unset fields left out)."""
    return _client().sanitize_for_serialization(model)
