"""An ApiClient that reports every request it sends, so that the controller can count them
(`gpu_policy_api_requests_total{verb,resource,code}`) without touching the library's objects.

Every request of the official client, a WATCH included (once, when it is sent), goes through
its REST client's `request` in kubernetes 30.x to 37.x; `ReportingApiClient` is an ApiClient
whose REST client is a subclass that reports each one, then answers or raises as before.
"""

from __future__ import annotations

from typing import Any, Callable

from kubernetes.client import ApiClient, rest

#: (HTTP method, URL, query parameters when the client passes them apart, status code or "error")
Report = Callable[[str, str, Any, str], None]


class _ReportingRest(rest.RESTClientObject):
    def __init__(self, configuration, report: Report):
        super().__init__(configuration)
        self._report = report

    def request(self, method, url, *args, **kwargs):
        query = kwargs.get("query_params")
        try:
            response = super().request(method, url, *args, **kwargs)
        except Exception as e:  # reported, then raised on unchanged
            self._report(method, url, query, str(getattr(e, "status", None) or "error"))
            raise
        self._report(method, url, query, str(getattr(response, "status", "") or ""))
        return response


class ReportingApiClient(ApiClient):
    """An ApiClient for `configuration` that calls `report` once per request it sends."""

    def __init__(self, configuration, report: Report):
        super().__init__(configuration)
        self.rest_client = _ReportingRest(configuration, report)
