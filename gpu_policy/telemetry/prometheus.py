"""DCGM telemetry from a Prometheus server that scrapes dcgm-exporter.

Queries (PromQL; see docs/telemetry.md): a range query over the window for
DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_XID_ERRORS, instant queries for memory,
engine activity, power and temperature, and ``timestamp(DCGM_FI_DEV_GPU_UTIL)``
for how fresh each GPU's data is. A GPU is identified by (Hostname or hostname,
gpu). Every request is bounded by a timeout and retried with backoff; when all
attempts fail, `TelemetryUnavailable` says why in one line.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable

from gpu_policy.errors import GpuPolicyError
from gpu_policy.telemetry.model import (
    ENGINE_ACTIVE, FB_FREE, FB_USED, GPU_UTIL, INSTANT_SERIES, POWER, TEMPERATURE, XID_ERRORS, GpuKey, GpuReading,
    GpuTelemetry, TelemetrySettings, is_blank)


class TelemetryUnavailable(GpuPolicyError):
    """Prometheus could not be read; the planner goes on without telemetry."""


class _Malformed(Exception):
    """Prometheus answered with data that is not what its API promises."""


_FIELD = {FB_USED: "memory_used_mib", FB_FREE: "memory_free_mib", ENGINE_ACTIVE: "engine_active",
          POWER: "power_w", TEMPERATURE: "temperature_c"}


def _key(labels: dict) -> GpuKey:
    host = labels.get("Hostname") or labels.get("hostname")
    if host is None or "gpu" not in labels:
        raise _Malformed(f"a DCGM series without Hostname/hostname or gpu labels: {sorted(labels)}")
    return GpuKey(host, int(labels["gpu"]))


class PrometheusDcgmSource:
    """Reads dcgm-exporter series from Prometheus at `url` (prometheus-api-client)."""

    def __init__(self, url: str, settings: TelemetrySettings | None = None, sleep: Callable[[float], None] = time.sleep):
        self.url = url.rstrip("/")
        self.settings = settings or TelemetrySettings()
        self._sleep = sleep
        self._client = None

    def _connect(self):
        if self._client is None:
            from prometheus_api_client import PrometheusConnect
            from urllib3.util.retry import Retry

            # our own retries below: one place that bounds them and words the failure
            self._client = PrometheusConnect(self.url, disable_ssl=True, retry=Retry(total=0, raise_on_status=False),
                                             timeout=self.settings.timeout_s)
        return self._client

    def collect(self, settings: TelemetrySettings | None = None) -> GpuTelemetry:
        s = settings or self.settings
        now = time.time()
        start, end = dt.datetime.fromtimestamp(now - s.span_s), dt.datetime.fromtimestamp(now)
        step = f"{s.step():g}s"
        gpus: dict[GpuKey, GpuReading] = {}

        def reading(labels: dict) -> GpuReading:
            key = _key(labels)
            r = gpus.setdefault(key, GpuReading())
            r.model = r.model or labels.get("modelName")
            r.uuid = r.uuid or labels.get("UUID")
            r.pod = r.pod or labels.get("pod")
            r.namespace = r.namespace or labels.get("namespace")
            return r

        def utilization(items):
            return [(item["metric"], [(float(t), float(v)) for t, v in item["values"] if not is_blank(float(v))])
                    for item in items]

        def xids(items):
            return [(item["metric"], sorted({(float(t), int(float(v)), item["metric"].get("err_msg", ""))
                                             for t, v in item["values"] if not is_blank(float(v)) and float(v) > 0}))
                    for item in items]

        def latest(items):
            return [(item["metric"], float(item["value"][1])) for item in items]

        for labels, samples in self._query(lambda c: c.custom_query_range(GPU_UTIL, start, end, step), utilization,
                                           f"{GPU_UTIL} over {s.window_s:g} s"):
            reading(labels).utilization = samples
        for labels, seen in self._query(lambda c: c.custom_query(f"timestamp({GPU_UTIL})"), latest,
                                        f"timestamp({GPU_UTIL})"):
            reading(labels).last_seen = seen
        for labels, events in self._query(lambda c: c.custom_query_range(XID_ERRORS, start, end, step), xids, XID_ERRORS):
            reading(labels).xids = events
        for series in INSTANT_SERIES:
            for labels, value in self._query(lambda c, q=series: c.custom_query(q), latest, series):
                setattr(reading(labels), _FIELD[series], None if is_blank(value) else value)
        return GpuTelemetry(source=f"prometheus {self.url}", collected_at=now, window_s=s.window_s, gpus=gpus)

    def _query(self, call: Callable[[Any], list], parse: Callable[[list], list], what: str) -> list:
        """Run one query and parse its series, with bounded retries; every failure
        ends as TelemetryUnavailable."""
        import requests
        from prometheus_api_client import PrometheusApiClientException

        s = self.settings
        attempts = s.retries + 1
        problem = ""
        for attempt in range(attempts):
            if attempt:
                self._sleep(s.backoff_s * 2 ** (attempt - 1))
            try:
                result = call(self._connect())
                if not isinstance(result, list) or not all(isinstance(i, dict) and "metric" in i for i in result):
                    raise _Malformed("the result is not a list of series")
                parsed = parse(result)
                for labels, _ in parsed:
                    _key(labels)  # every series names its GPU
                return parsed
            except requests.exceptions.Timeout:
                problem = f"did not answer within {s.timeout_s:g} s"
            except requests.exceptions.ConnectionError as e:
                cause = _root_cause(e)  # with retries off, urllib3 wraps read time-outs this way
                problem = f"did not answer within {s.timeout_s:g} s" if cause == "timed out" else f"is unreachable ({cause})"
            except PrometheusApiClientException as e:
                code = str(e).split("(")[0].replace("HTTP Status Code", "").strip()
                problem = f"answered HTTP {code}"
                if code.startswith("4"):  # a bad query or auth: retrying will not help
                    break
            except (ValueError, KeyError, TypeError, IndexError, _Malformed) as e:
                problem = f"sent malformed data ({type(e).__name__}: {str(e)[:120]})"
        raise TelemetryUnavailable(f"Prometheus at {self.url} {problem} for {what} "
                                   f"after {attempt + 1} attempt{'s' if attempt else ''}")


def _root_cause(e: BaseException) -> str:
    while e.__cause__ or e.__context__:
        e = e.__cause__ or e.__context__
    text = str(e)
    for marker in ("Connection refused", "Name or service not known", "timed out"):
        if marker in text:
            return marker.lower()
    return type(e).__name__
